/**
 * Black-box: the sharded layout on PostgreSQL (merged-view/postgres-view-layout.ts) with real
 * `ecapi-ingest worker` processes. One data set's events (re-sends, shared identifiers, a 1 h merge
 * window, three hours of arrivals) are queued; the view that `worker --view-layout sharded
 * --view-partitions 2` makes of them must be, table by table (records with their identity key,
 * identity nodes, identifier links, counters summed over the shards), the one a single default
 * (data-set layout) worker makes of the same queue in another database:
 * - two sharded workers on one database, which share the data set's three lanes (identity part, two
 *   record shards) between them (leases, postgres-partitions.ts), events appended while they run;
 * - one sharded worker SIGKILLed at random moments and restarted, several times.
 * Afterwards no fence is left and every lane is at the queue's end. Queue retention runs every
 * second meanwhile; a third test holds the record shards back (leased by a worker that does not
 * step them) and checks that retention and the lag wait for the slowest lane of the partition. The layout is always given
 * on the command line, so the file tests the same whatever ECAPI_VIEW_LAYOUT says.
 * Skipped without ECAPI_TEST_DATABASE_URL.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createPool, DB_NOW_MS } from '../../src/postgres/database.js';
import { fixPostgresViewLayout } from '../../src/merged-view/postgres-view-layout.js';
import { PostgresEventQueue } from '../../src/queue/postgres-event-queue.js';
import { queuePartitionOf } from '../../src/postgres/partitions.js';
import { partitionConsumer, VIEW_CONSUMER } from '../../src/model/consumer-offsets.js';
import { tempDataDir } from '../helpers/server-process.js';
import { generateEvents, prng, type GeneratedRecord } from '../helpers/event-generator.js';
import { assertSameTables } from '../helpers/view-dump.js';
import { assertRunning, logLines, reap, spawnWorker, type WorkerProcess } from '../helpers/worker-process.js';
import { freshDatabase, pgCli, pgOnly, queryDatabase } from '../helpers/postgres.js';

const DS = 'ds-b';
const PART = queuePartitionOf(DS);
const PART_NAME = `p${String(PART).padStart(2, '0')}`;
const EVENTS = 4000;
const CHUNK = 40;
const T0 = Date.UTC(2025, 4, 6, 19, 0);
/** Lease ids of the data set's lanes: its identity part, record shards 0 and 1 (postgres-view-layout.ts). */
const LANE_LEASES = [PART, 16 + PART, 32 + PART];
const LANE_OFFSETS = [partitionConsumer(VIEW_CONSUMER, PART), `${partitionConsumer(VIEW_CONSUMER, PART)}/s0`, `${partitionConsumer(VIEW_CONSUMER, PART)}/s1`];
const GENERATED = generateEvents(EVENTS, { seed: 23, dataSets: [DS], idSpace: 0.6, identifierSpace: 0.25 });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A migrated database with the data set (1 h merge window; view retention out of the way of 2025's events) and its data dir. */
async function prepare(name: string): Promise<{ url: string; dataDir: string }> {
  const url = await freshDatabase(name);
  const dataDir = tempDataDir(`ecapi-${name}-`);
  await pgCli(dataDir, url, ['migrate']);
  await pgCli(dataDir, url, ['data-set', 'create', DS]);
  await pgCli(dataDir, url, ['data-set', 'policy', DS, '--merge-window', '1h', '--view-retention', '3650d']);
  return { url, dataDir };
}

/** Appends GENERATED[from, to) in requests of CHUNK events, in order; arrivals spread over three hours. */
async function fillQueue(url: string, from: number, to: number): Promise<void> {
  const pool = createPool(url, 'production', { max: 2 });
  const queue = new PostgresEventQueue(pool);
  try {
    const appends: Promise<unknown>[] = [];
    for (let i = from; i < to; i += CHUNK) {
      const part: GeneratedRecord[] = GENERATED.slice(i, Math.min(i + CHUNK, to));
      appends.push(queue.append({
        requestId: `req-${i}`, keyId: 'key_test', dataSetId: DS, receivedAt: T0 + Math.floor((i / EVENTS) * 3 * 3_600_000), policyVersion: 1, mergeWindowMs: 3_600_000, // the policy set below
        events: part.map((g) => g.event), metas: part.map((g) => g.meta),
      }));
    }
    await Promise.all(appends);
  } finally {
    await queue.close();
    await pool.end();
  }
}

function startPgWorker(dataDir: string, url: string, layoutArgs: readonly string[]): WorkerProcess {
  return spawnWorker(['--data-dir', dataDir, 'worker', '--batch-size', '50', '--retention-every', '1s', ...layoutArgs], { ECAPI_DATABASE_URL: url, ECAPI_LOG_LEVEL: 'info' });
}

const SHARDED = ['--view-layout', 'sharded', '--view-partitions', '2'];
const DATA_SETS = ['--view-layout', 'data-sets'];

async function until(what: string, check: () => Promise<boolean>, workers: readonly WorkerProcess[], timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    for (const worker of workers) assertRunning(worker, what);
    assert.ok(Date.now() < deadline, `${what}: not within ${timeoutMs / 1000} s:\n${workers.map((w) => w.log()).join('\n---\n')}`);
    await sleep(100);
  }
}

async function stop(worker: WorkerProcess, what: string): Promise<void> {
  await until(`${what}: started`, async () => logLines(worker, 'consumer started').length > 0, [worker]);
  worker.child.kill('SIGTERM');
  await worker.exited;
  assert.equal(worker.child.exitCode, 0, `${what}: SIGTERM, exit code 0:\n${worker.log()}`);
}

const laneOffsets = async (url: string) =>
  (await queryDatabase<{ consumer: string; next_seq: number }>(url, 'SELECT consumer, next_seq FROM consumer_offsets WHERE consumer = ANY($1::text[]) ORDER BY consumer COLLATE "C"', [LANE_OFFSETS]))
    .map((r) => Number(r.next_seq));
const allAtEnd = async (url: string) => {
  const offsets = await laneOffsets(url);
  return offsets.length === LANE_OFFSETS.length && offsets.every((o) => o === EVENTS + 1);
};

/** The view as the readers see it: records with their identity key (from the identity part when their own is NULL), identities, counters summed over the shards. */
async function dumpPgView(url: string): Promise<Record<string, unknown[]>> {
  return {
    view_records: await queryDatabase(
      url,
      `SELECT r.data_set_id, r.record_key, r.event_id, r.first_seq, r.last_seq, r.first_received_at, r.last_received_at, r.merged_count,
              COALESCE(r.identity_key, ri.identity_key) AS identity_key, r.measurement_only, r.event
         FROM view_records r LEFT JOIN view_record_identities ri ON ri.data_set_id = r.data_set_id AND ri.record_key = r.record_key
        ORDER BY r.data_set_id, r.record_key COLLATE "C"`,
    ),
    identity_nodes: await queryDatabase(url, 'SELECT * FROM identity_nodes ORDER BY data_set_id, identity_key COLLATE "C"'),
    identity_identifiers: await queryDatabase(url, 'SELECT * FROM identity_identifiers ORDER BY data_set_id, identifier COLLATE "C"'),
    view_counters: await queryDatabase(
      url,
      'SELECT data_set_id, hour, name, SUM(n)::bigint AS n FROM view_counters GROUP BY data_set_id, hour, name HAVING SUM(n) <> 0 ORDER BY data_set_id, hour, name COLLATE "C"',
    ),
  };
}

/** What a sharded view must look like when done: its layout, every lane at the queue's end, no fence, record identities consistent with the records. */
async function assertShardedDone(url: string, what: string): Promise<void> {
  assert.deepEqual(await queryDatabase(url, 'SELECT kind, shards FROM view_layout'), [{ kind: 'sharded', shards: 2 }], `${what}: the layout recorded`);
  assert.deepEqual(await laneOffsets(url), LANE_OFFSETS.map(() => EVENTS + 1), `${what}: every lane of the data set's partition at the queue's end`);
  const lanes = await queryDatabase<{ n: number }>(url, `SELECT count(*)::int AS n FROM consumer_offsets WHERE starts_with(consumer, 'merged-view/p')`);
  assert.equal(lanes[0]!.n, 16 * 3, `${what}: an offset row per lane (16 partitions × (identity part + 2 shards))`);
  assert.deepEqual(await queryDatabase(url, 'SELECT consumer, fence_seq, fence_holder FROM consumer_offsets WHERE fence_seq IS NOT NULL OR fence_holder IS NOT NULL'), [], `${what}: no fence left`);
  // Every record has its identity part's row (same first arrival), and nothing else does; the records' own identity key stays NULL.
  const mismatched = await queryDatabase(
    url,
    `SELECT r.record_key, ri.record_key AS identity_row FROM view_records r FULL JOIN view_record_identities ri ON ri.data_set_id = r.data_set_id AND ri.record_key = r.record_key
      WHERE r.record_key IS NULL OR ri.record_key IS NULL OR r.first_received_at <> ri.first_received_at OR r.identity_key IS NOT NULL LIMIT 5`,
  );
  assert.deepEqual(mismatched, [], `${what}: view_record_identities matches view_records`);
}

/** The reference: the view one default-layout worker makes of the whole queue (computed once). */
let reference: Promise<Record<string, unknown[]>> | undefined;
function referenceView(): Promise<Record<string, unknown[]>> {
  reference ??= (async () => {
    const { url, dataDir } = await prepare('sharded_ref');
    await fillQueue(url, 0, EVENTS);
    const worker = startPgWorker(dataDir, url, DATA_SETS);
    await until('the default worker applies the queue', async () => (await laneOffsets(url))[0] === EVENTS + 1, [worker]);
    await stop(worker, 'the default worker');
    assert.deepEqual(await queryDatabase(url, 'SELECT kind, shards FROM view_layout'), [{ kind: 'data-sets', shards: 0 }]);
    const view = await dumpPgView(url);
    assert.ok((view.view_counters as { name: string }[]).some((c) => c.name === 'discarded'), 'the merge window discarded something');
    assert.ok((view.view_counters as { name: string }[]).some((c) => c.name === 'merged'), 'some records were merged');
    assert.ok((view.identity_nodes as { parent: string | null }[]).some((n) => n.parent !== null), 'some identities were joined');
    assert.ok(view.view_records!.length > EVENTS / 3, 'many records');
    return view;
  })();
  return reference;
}

test('PostgreSQL sharded layout: two workers sharing one data set\'s lanes make the view a single default-layout worker makes', { ...pgOnly, timeout: 240_000 }, async () => {
  const expected = await referenceView();
  const { url, dataDir } = await prepare('sharded_two');
  await fillQueue(url, 0, EVENTS / 2);
  const a = startPgWorker(dataDir, url, SHARDED);
  const workers = [a];
  try {
    await until('worker A applies some of the queue', async () => (await laneOffsets(url)).some((o) => o > 1), workers);
    const b = startPgWorker(dataDir, url, SHARDED);
    workers.push(b);
    // The lanes are rebalanced (each live worker's share is half the lanes): the data set's lanes end up with both workers.
    const owners = async () =>
      (await queryDatabase<{ owner: string | null }>(url, 'SELECT owner FROM consumer_leases WHERE part = ANY($1::int[])', [LANE_LEASES])).map((r) => r.owner);
    await until('the data set\'s lanes shared by the two workers', async () => {
      const o = await owners();
      return o.length === 3 && o.every((x) => x !== null) && new Set(o).size === 2;
    }, workers, 60_000);
    // `worker status` names both workers with the lanes each holds: together every lane of the
    // layout (16 partitions × (identity part + 2 shards)), each once, none left unheld.
    await until('`worker status` lists the two workers holding every lane', async () => {
      const status = await pgCli(dataDir, url, ['worker', 'status']);
      const held = (status.workers as { lanes: string[] }[]).flatMap((w) => w.lanes);
      return status.workers.length === 2 && held.length === 48 && status.unheld_lanes.length === 0;
    }, workers, 60_000);
    const status = await pgCli(dataDir, url, ['worker', 'status']);
    const ids = [a, b].map((w) => logLines(w, 'consumer started')[0]?.worker as string);
    assert.deepEqual(new Set(status.workers.map((w: { worker: string }) => w.worker)), new Set(ids), 'the listed workers are the two running ones');
    const held = (status.workers as { lanes: string[] }[]).flatMap((w) => w.lanes);
    assert.equal(new Set(held).size, 48, `each lane held once: ${held.join(',')}`);
    for (const lane of [PART_NAME, `${PART_NAME}/id`, `${PART_NAME}/s0`, `${PART_NAME}/s1`]) {
      assert.equal(held.includes(lane), lane !== PART_NAME, `lane ${lane} ${lane === PART_NAME ? 'is not a lane of the sharded layout' : 'is held'}`);
    }
    for (const w of status.workers as { pid: number; worker: string; lanes: string[] }[]) {
      assert.ok(w.worker.includes(`:${w.pid}:`), `the pid is the worker's: ${w.worker} / ${w.pid}`);
      assert.ok(w.lanes.length >= 1, `${w.worker} holds lanes`);
    }
    // The second half arrives while both apply.
    await fillQueue(url, EVENTS / 2, EVENTS);
    await until('the two workers apply the queue', () => allAtEnd(url), workers);
    const o = await owners();
    assert.equal(new Set(o).size, 2, `still shared by two workers at the end: ${o.join(', ')}`);
    for (const [name, worker] of [['A', a], ['B', b]] as const) {
      const lines = logLines(worker, 'consumer started');
      assert.deepEqual([lines[0]?.layout, lines[0]?.shards], ['sharded', 2], `worker ${name}'s "consumer started" line`);
    }
    await Promise.all(workers.map((w, i) => stop(w, `worker ${i === 0 ? 'A' : 'B'}`)));
  } finally {
    await reap(workers);
  }
  // Stopped cleanly, they left no membership and released every lease.
  const after = await pgCli(dataDir, url, ['worker', 'status']);
  assert.deepEqual(after.workers, [], 'no worker after both stopped');
  assert.equal(after.unheld_lanes.length, 48, 'every lane unheld after both stopped');
  await assertShardedDone(url, 'two workers');
  assertSameTables(await dumpPgView(url), expected, 'two sharded workers vs one default-layout worker');
});

test('PostgreSQL sharded layout: a worker SIGKILLed at random moments and restarted ends with the view of an uninterrupted default-layout worker', { ...pgOnly, timeout: 240_000 }, async (t) => {
  const expected = await referenceView();
  const { url, dataDir } = await prepare('sharded_kill');
  await fillQueue(url, 0, EVENTS);
  const rand = prng(Date.now() & 0xffff);
  let kills = 0;
  const positions: string[] = [];
  for (let i = 0; i < 6 && !(await allAtEnd(url)); i++) {
    const before = (await laneOffsets(url)).join(',');
    const worker = startPgWorker(dataDir, url, SHARDED);
    try {
      // Killed while applying: once a lane has moved, after a random delay.
      await until(`run ${i + 1}: a lane moves`, async () => (await laneOffsets(url)).join(',') !== before || (await allAtEnd(url)), [worker], 30_000);
      await sleep(Math.floor(rand() * 300));
      assertRunning(worker, `run ${i + 1} (at its kill)`);
    } finally {
      worker.child.kill('SIGKILL');
      await worker.exited;
    }
    kills++;
    positions.push((await laneOffsets(url)).join('/'));
    // A killed worker's leases and membership expire after LEASE_MS (15 s); the test does not wait for that.
    await queryDatabase(url, 'UPDATE consumer_leases SET owner = NULL, expires_at = 0');
    await queryDatabase(url, 'DELETE FROM consumer_workers');
  }
  t.diagnostic(`${kills} kills; the lanes (identity part/shard 0/shard 1) after each: ${positions.join(' ')}`);
  assert.ok(kills >= 2, `expected at least two kills before the queue was applied, got ${kills}`);
  assert.ok(positions.some((p) => new Set(p.split('/')).size > 1), `some kill left the lanes at different positions: ${positions.join(' ')}`);
  const last = startPgWorker(dataDir, url, SHARDED);
  try {
    await until('the last run applies the queue', () => allAtEnd(url), [last]);
    await stop(last, 'the last run');
  } finally {
    await reap([last]);
  }
  await assertShardedDone(url, 'after SIGKILLs');
  assertSameTables(await dumpPgView(url), expected, 'a sharded worker SIGKILLed and restarted vs one default-layout worker');
});

test('PostgreSQL sharded layout: a partition\'s queue retention and lag wait for its slowest lane (record shards leased by another worker that does not step them)', { ...pgOnly, timeout: 240_000 }, async () => {
  const expected = await referenceView();
  const { url, dataDir } = await prepare('sharded_slow');
  await fillQueue(url, 0, EVENTS);
  const segments = async () => Number((await queryDatabase<{ n: number }>(url, 'SELECT count(*)::int AS n FROM queue_segments WHERE part = $1', [PART]))[0]!.n);
  assert.equal(await segments(), EVENTS / CHUNK);
  // The layout recorded as the worker records it, and the data set's record shards leased by a worker that never steps them.
  const pool = createPool(url, 'production', { max: 1 });
  try {
    assert.deepEqual(await fixPostgresViewLayout(pool, { kind: 'sharded', shards: 2 }), { kind: 'sharded', shards: 2 });
  } finally {
    await pool.end();
  }
  await queryDatabase(url, `INSERT INTO consumer_workers (worker_id, host, pid, seen_at) VALUES ('stalled:1', 'stalled', 1, ${DB_NOW_MS})`);
  await queryDatabase(url, `UPDATE consumer_leases SET owner = 'stalled:1', expires_at = ${DB_NOW_MS} + 600000 WHERE part = ANY($1::int[])`, [LANE_LEASES.slice(1)]);
  const worker = startPgWorker(dataDir, url, SHARDED);
  try {
    await until('the identity part applies the queue', async () => (await laneOffsets(url))[0] === EVENTS + 1, [worker]);
    // Queue retention (every second, everything is older than its 7 days) while the shards are at 1: nothing of the partition may go.
    await sleep(3500);
    assert.deepEqual(await laneOffsets(url), [EVENTS + 1, 1, 1], 'the identity part at the end, the shards not started');
    assert.equal(await segments(), EVENTS / CHUNK, 'queue retention kept every segment a record shard has not applied');
    const status = (await pgCli(dataDir, url, ['worker', 'status'])) as { lag_records: number; next_seq: number };
    assert.deepEqual([status.lag_records, status.next_seq], [EVENTS, 1], 'the lag counts the slowest lane');
    // The stalled worker's leases expire: the worker takes the shards over and applies them.
    await queryDatabase(url, `UPDATE consumer_leases SET owner = NULL, expires_at = 0 WHERE owner = 'stalled:1'`);
    await queryDatabase(url, `DELETE FROM consumer_workers WHERE worker_id = 'stalled:1'`);
    await until('the record shards apply the queue', () => allAtEnd(url), [worker]);
    await until('queue retention deletes what every lane applied', async () => (await segments()) === 0, [worker], 30_000);
    await stop(worker, 'the worker');
  } finally {
    await reap([worker]);
  }
  await assertShardedDone(url, 'slow shards');
  assertSameTables(await dumpPgView(url), expected, 'a sharded view whose shards lagged behind queue retention vs one default-layout worker');
});
