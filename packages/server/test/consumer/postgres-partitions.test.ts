/**
 * The PostgreSQL profile's consumer (postgres-partitions.ts) on a real server: its idle lanes do not
 * query the queue or their offsets while their partition gets nothing, whether the queue stands
 * still or another partition is appended to, and an append to theirs wakes them (queue-head-watch.ts). Skipped without ECAPI_TEST_DATABASE_URL. No timing is asserted: the test
 * waits for counts of what the worker did, however fast the machine is. In the sharded layout, a
 * lane whose lease another worker took is let go of, and so is its partition's shared read once no
 * lane of that partition is left here (shared-partition-reads.ts: a window kept for lanes gone
 * elsewhere would hold up to 2 × S × batch records for nothing).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type pg from 'pg';
import { createPool, DB_NOW_MS, migrate } from '../../src/postgres/database.js';
import { PostgresEventQueue } from '../../src/queue/postgres-event-queue.js';
import { PostgresViewStore } from '../../src/merged-view/postgres-view-store.js';
import { LeasedPartitions, partitionedLag, runPartitionedConsumer } from '../../src/consumer/postgres-partitions.js';
import { fixPostgresViewLayout, partitionLanes, viewLanes } from '../../src/merged-view/postgres-view-layout.js';
import { createLogger } from '../../src/observability/logger.js';
import { VIEW_CONSUMER } from '../../src/model/consumer-offsets.js';
import { recordKeyForId } from '../../src/merged-view/merge.js';
import type { QueueAppend } from '../../src/queue/event-queue.js';
import { freshDatabase, pgOnly } from '../helpers/postgres.js';
import { tempDataDir } from '../helpers/server-process.js';
import { PostgresStorage } from '../../src/storage/postgres-storage.js';
import { queuePartitionOf } from '../../src/postgres/partitions.js';
import { QUEUE_PARTITIONS } from '../../src/postgres/migrations.js';

const append = (dataSetId: string, id: string): QueueAppend => ({
  requestId: `r-${id}`,
  keyId: 'key_test',
  dataSetId,
  receivedAt: Date.now(),
  policyVersion: 1,
  mergeWindowMs: 0,
  events: [{ data_set_id: dataSetId, id, timestamp: 1_700_000_000, event_type: 'purchase' }],
  metas: [undefined],
});

/** The pool, with every `query` text it is given recorded (what the worker asks of the database). */
function recording(pool: pg.Pool): { pool: pg.Pool; queries: Query[] } {
  const queries: Query[] = [];
  const proxy = new Proxy(pool, {
    get(target, prop) {
      if (prop === 'query') {
        return (text: string | { text: string }, ...rest: unknown[]) => {
          queries.push({ text: typeof text === 'string' ? text : text.text, params: Array.isArray(rest[0]) ? (rest[0] as unknown[]) : [] });
          return (target.query as (...args: unknown[]) => unknown)(text, ...rest);
        };
      }
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { pool: proxy, queries };
}

interface Query {
  readonly text: string;
  readonly params: readonly unknown[];
}

/** The watch's read (queue-head-watch.ts, as postgres-partitions.ts makes it): the head and what was appended where. */
const isHeadRead = (q: Query) => /FROM queue_head h WHERE h\.id = 1/.test(q.text);
const headReads = (queries: readonly Query[]) => queries.filter(isHeadRead).length;
/** A lane's own work: its offset, its segments. The partition it was for, from the parameters. */
function laneQuery(q: Query): number | null {
  if (isHeadRead(q)) return null;
  if (/consumer_offsets/.test(q.text)) {
    const name = q.params.find((p) => typeof p === 'string' && p.startsWith(`${VIEW_CONSUMER}/p`)) as string | undefined;
    return name === undefined ? -1 : Number(name.slice(VIEW_CONSUMER.length + 2));
  }
  if (/queue_segments/.test(q.text)) {
    const part = q.params.length >= 2 ? Number(q.params[q.params.length - 1]) : NaN;
    return Number.isInteger(part) ? part : -1;
  }
  return null;
}

async function until(what: string, check: () => Promise<boolean> | boolean): Promise<void> {
  for (let i = 0; i < 3000; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.fail(`gave up waiting: ${what}`);
}

test('PostgreSQL: idle lanes leave the queue alone while their partition gets nothing; an append to it wakes them', pgOnly, async () => {
  const url = await freshDatabase('lanes');
  await migrate(url, 'production');
  const pool = createPool(url, 'production', { max: 6 });
  const { pool: watched, queries } = recording(pool);
  const store = new PostgresViewStore(watched);
  const queue = new PostgresEventQueue(pool);
  let stop!: () => void;
  const stopped = new Promise<void>((resolve) => (stop = resolve));
  const run = runPartitionedConsumer(watched, store, {
    logger: createLogger({ level: 'silent' }),
    stopped,
    batchSize: 100,
    pollMs: 10,
    mergeWindowMs: () => 0,
    workerId: 'test:1',
    env: 'production',
  });
  const lag = async () => (await partitionedLag(pool, await store.offsets(`${VIEW_CONSUMER}/`), Date.now())).lag_records;
  try {
    const [a, b, c] = ['a', 'b', 'c'];
    const partOf = { a: queuePartitionOf(a), b: queuePartitionOf(b), c: queuePartitionOf(c) };
    assert.equal(new Set(Object.values(partOf)).size, 3, 'three data sets in three partitions');
    for (const ds of [a, b, c]) await queue.append(append(ds, `${ds}-1`));
    await until('the first records applied', async () => (await lag()) === 0);

    // Windows of 50 of the watch's reads (the lanes keep asking while they poll), until three in a
    // row hold no lane query of a partition outside `allowed`; a worker whose idle lanes poll the
    // queue never gets one. Returns where the first of the three began.
    const settle = async (allowed: ReadonlySet<number>, what: string) => {
      let clean = 0;
      let quiet = queries.length;
      for (let window = 0; clean < 3; window++) {
        assert.ok(window < 100, what);
        const from = queries.length;
        const mark = headReads(queries);
        await until('the lanes keep polling', () => headReads(queries) >= mark + 50);
        const stray = queries.slice(from).map(laneQuery).some((part) => part !== null && !allowed.has(part));
        if (stray) clean = 0;
        else if (clean++ === 0) quiet = from;
      }
      return quiet;
    };
    const strays = (from: number, allowed: ReadonlySet<number>) => queries.slice(from).map(laneQuery).filter((part) => part !== null && !allowed.has(part));

    // 1. Nothing appended: no lane reads the queue or its offset.
    let quiet = await settle(new Set(), 'idle lanes kept reading the queue or their offsets while its head stood still');
    assert.deepEqual(strays(quiet, new Set()), []);

    // 2. A sender keeps appending to data set a: only a's lane works; the other lanes stay idle.
    let sending = true;
    let sent = 0;
    const sender = (async () => {
      while (sending) await queue.append(append(a, `a-busy-${++sent}`));
    })();
    try {
      quiet = await settle(new Set([partOf.a]), 'lanes of partitions that got nothing stepped while another partition was appended to');
      const before = sent;
      const mark = headReads(queries);
      await until('more appends and reads', () => sent >= before + 20 && headReads(queries) >= mark + 50);
      assert.deepEqual(strays(quiet, new Set([partOf.a])), []);
      assert.ok(queries.slice(quiet).some((q) => laneQuery(q) === partOf.a), "a's lane applied what was appended");
    } finally {
      sending = false;
      await sender;
    }
    await until('a applied', async () => (await lag()) === 0);

    // 3. An append to b wakes b's lane, which applies it.
    const fromB = queries.length;
    await queue.append(append(b, 'b-2'));
    await until('the new record applied', async () => (await lag()) === 0);
    assert.ok(queries.slice(fromB).some((q) => laneQuery(q) === partOf.b && /FROM queue_segments/.test(q.text)), "b's lane read the new segment");
    assert.equal((await store.getRecord(b, recordKeyForId('b-2')))?.eventId, 'b-2');
    assert.equal((await store.getRecord(a, recordKeyForId(`a-busy-${sent}`)))?.eventId, `a-busy-${sent}`);
  } finally {
    stop();
    await run;
    await queue.close();
    await store.close();
    await pool.end();
  }
});

test('PostgreSQL: busy lanes on a small pool never wait for one another (the suppression list reads from a pool of its own)', pgOnly, async () => {
  // Every batch reads the suppression list inside its transaction (view-consumer.ts).
  // From the worker's main pool, two lanes holding both of its connections would each wait for a
  // third until the connect timeout, and their batches would fail.
  const url = await freshDatabase('lanes_pool');
  await migrate(url, 'production');
  const storage = new PostgresStorage(url, tempDataDir('ecapi-lanes-pool-'), 'production', { poolSize: 2 });
  const lines: string[] = [];
  const logger = createLogger({ level: 'warn', destination: { write: (line: string) => void lines.push(line) } });
  const queue = storage.openQueue();
  const dataSets = ['a', 'b', 'c', 'd', 'e', 'f'].filter((ds, i, all) => all.findIndex((o) => queuePartitionOf(o) === queuePartitionOf(ds)) === i).slice(0, 4);
  assert.equal(dataSets.length, 4, 'four data sets in four partitions');
  for (const ds of dataSets) {
    for (let i = 0; i < 20; i++) await queue.append({ ...append(ds, `${ds}-${i}`), events: Array.from({ length: 50 }, (_, j) => ({ data_set_id: ds, id: `${ds}-${i}-${j}`, timestamp: 1_700_000_000, event_type: 'purchase' })), metas: Array.from({ length: 50 }, () => undefined) });
  }
  let stop!: () => void;
  const stopped = new Promise<void>((resolve) => (stop = resolve));
  const run = storage.runConsumer({ logger, stopped, batchSize: 100, pollMs: 10, mergeWindowMs: () => 0 });
  const reader = storage.queueReader();
  try {
    await until('every record applied', async () => (await reader.lag(Date.now())).lag_records === 0);
    assert.deepEqual(lines.filter((l) => l.includes('consumer batch failed')), [], 'no batch failed');
  } finally {
    stop();
    await run;
    await storage.close();
  }
});

test('PostgreSQL sharded layout: a partition whose lanes all went to another worker lets its shared read go; one that keeps a lane keeps it', pgOnly, async () => {
  const url = await freshDatabase('lease_loss');
  await migrate(url, 'production');
  const pool = createPool(url, 'production', { max: 2 });
  const store = new PostgresViewStore(pool);
  const layout = await fixPostgresViewLayout(pool, { kind: 'sharded', shards: 2 });
  const leases = new LeasedPartitions(pool, store, layout, {
    logger: createLogger({ level: 'silent' }),
    stopped: new Promise<void>(() => undefined),
    batchSize: 100,
    mergeWindowMs: () => 0,
    workerId: 'test:1',
    env: 'production',
  });
  const everyPart = Array.from({ length: QUEUE_PARTITIONS }, (_, p) => p);
  /** Another worker takes these leases, as it would once this worker's had expired (held 10 min, so this worker cannot claim them back). */
  const takenByAnother = (leaseIds: readonly number[]) =>
    pool.query(`UPDATE consumer_leases SET owner = 'test:2', expires_at = ${DB_NOW_MS} + 600000 WHERE part = ANY($1::integer[])`, [leaseIds]);
  const ownedOf = (part: number) => partitionLanes(layout, part).filter((lane) => leases.owned.has(lane.lease)).length;
  try {
    await leases.refresh();
    assert.equal(leases.owned.size, viewLanes(layout).length, 'alone, the worker leases every lane');
    assert.deepEqual(leases.sharedReadParts(), everyPart, 'one shared read per partition');

    // One record shard of partition 3 goes: its other two lanes are still here, and so is its read.
    await takenByAnother([partitionLanes(layout, 3)[1]!.lease]);
    await leases.refresh();
    assert.equal(ownedOf(3), 2);
    assert.deepEqual(leases.sharedReadParts(), everyPart);

    // Every lane of partition 5, and the last two of partition 3: both reads go, the others stay.
    await takenByAnother([...partitionLanes(layout, 5).map((lane) => lane.lease), partitionLanes(layout, 3)[0]!.lease, partitionLanes(layout, 3)[2]!.lease]);
    await leases.refresh();
    assert.equal(ownedOf(5), 0);
    assert.equal(ownedOf(3), 0);
    assert.deepEqual(leases.sharedReadParts(), everyPart.filter((p) => p !== 3 && p !== 5));

    // Partition 5's lanes come back (the other worker left): a new read for them.
    await pool.query(`UPDATE consumer_leases SET owner = NULL, expires_at = 0 WHERE part = ANY($1::integer[])`, [partitionLanes(layout, 5).map((lane) => lane.lease)]);
    await leases.refresh();
    assert.equal(ownedOf(5), 3);
    assert.deepEqual(leases.sharedReadParts(), everyPart.filter((p) => p !== 3));
  } finally {
    await leases.release();
    await store.close();
    await pool.end();
  }
});
