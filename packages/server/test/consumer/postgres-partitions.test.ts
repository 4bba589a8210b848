/**
 * The PostgreSQL profile's consumer (postgres-partitions.ts) on a real server: its idle lanes do not
 * query the queue or their offsets while the queue's head does not move, and an append wakes them
 * (queue-head-watch.ts). Skipped without ECAPI_TEST_DATABASE_URL. No timing is asserted: the test
 * waits for counts of what the worker did, however fast the machine is.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type pg from 'pg';
import { createPool, migrate } from '../../src/postgres/database.js';
import { PostgresEventQueue } from '../../src/queue/postgres-event-queue.js';
import { PostgresViewStore } from '../../src/merged-view/postgres-view-store.js';
import { partitionedLag, runPartitionedConsumer } from '../../src/consumer/postgres-partitions.js';
import { createLogger } from '../../src/observability/logger.js';
import { VIEW_CONSUMER } from '../../src/model/consumer-offsets.js';
import { recordKeyForId } from '../../src/merged-view/merge.js';
import type { QueueAppend } from '../../src/queue/event-queue.js';
import { freshDatabase, pgOnly } from '../helpers/postgres.js';

const append = (dataSetId: string, id: string): QueueAppend => ({
  requestId: `r-${id}`,
  keyId: 'key_test',
  dataSetId,
  receivedAt: Date.now(),
  policyVersion: 1,
  events: [{ data_set_id: dataSetId, id, timestamp: 1_700_000_000, event_type: 'purchase' }],
  metas: [undefined],
});

/** The pool, with every `query` text it is given recorded (what the worker asks of the database). */
function recording(pool: pg.Pool): { pool: pg.Pool; texts: string[] } {
  const texts: string[] = [];
  const proxy = new Proxy(pool, {
    get(target, prop) {
      if (prop === 'query') {
        return (text: string | { text: string }, ...rest: unknown[]) => {
          texts.push(typeof text === 'string' ? text : text.text);
          return (target.query as (...args: unknown[]) => unknown)(text, ...rest);
        };
      }
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { pool: proxy, texts };
}

const headReads = (texts: readonly string[]) => texts.filter((t) => /FROM queue_head WHERE id = 1$/.test(t.trim())).length;

async function until(what: string, check: () => Promise<boolean> | boolean): Promise<void> {
  for (let i = 0; i < 3000; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.fail(`gave up waiting: ${what}`);
}

test('PostgreSQL: idle lanes leave the queue alone while its head does not move; an append wakes them', pgOnly, async () => {
  const url = await freshDatabase('lanes');
  await migrate(url, 'production');
  const pool = createPool(url, 'production', { max: 6 });
  const { pool: watched, texts } = recording(pool);
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
    for (const ds of ['a', 'b', 'c']) await queue.append(append(ds, `${ds}-1`));
    await until('the first records applied', async () => (await lag()) === 0);
    // From the moment every lane is idle, none may read segments or offsets until something is
    // appended. Windows of 50 head reads (the lanes keep polling the head) until three in a row show
    // no such query; a worker whose idle lanes poll the queue never gets one.
    let clean = 0;
    let quiet = texts.length;
    for (let window = 0; clean < 3; window++) {
      assert.ok(window < 100, 'idle lanes kept reading the queue or their offsets while its head stood still');
      const from = texts.length;
      const mark = headReads(texts);
      await until('the lanes keep polling the head', () => headReads(texts) >= mark + 50);
      if (texts.slice(from).some((t) => /queue_segments|consumer_offsets/.test(t))) clean = 0;
      else if (clean++ === 0) quiet = from;
    }
    assert.deepEqual(texts.slice(quiet).filter((t) => /queue_segments|consumer_offsets/.test(t)), []);

    // An append moves the head: the lane of its partition wakes and applies it.
    await queue.append(append('b', 'b-2'));
    await until('the new record applied', async () => (await lag()) === 0);
    assert.ok(texts.slice(quiet).some((t) => /FROM queue_segments/.test(t)), 'a lane read the new segment');
    assert.equal((await store.getRecord('b', recordKeyForId('b-2')))?.eventId, 'b-2');
  } finally {
    stop();
    await run;
    await queue.close();
    await store.close();
    await pool.end();
  }
});
