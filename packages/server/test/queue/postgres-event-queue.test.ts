/**
 * The EventQueue contract against the PostgreSQL queue, plus what only a shared database has:
 * several queues (nodes) appending at once never interleave sequence numbers out of commit order,
 * so a reader that polls while they append never sees a gap it would skip.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { migrate, createPool } from '../../src/postgres/database.js';
import { PostgresEventQueue, readSegments } from '../../src/queue/postgres-event-queue.js';
import type { QueueAppend } from '../../src/queue/event-queue.js';
import { eventQueueContract } from './event-queue-contract.js';
import { freshDatabase, pgOnly, TEST_DATABASE_URL } from '../helpers/postgres.js';

async function freshPool() {
  const url = await freshDatabase('queue');
  await migrate(url, 'production');
  return { url, pool: createPool(url, 'production', { max: 4 }) };
}

if (TEST_DATABASE_URL) {
  eventQueueContract('PostgresEventQueue', {
    async create(observer) {
      const { url, pool } = await freshPool();
      const pools = [pool];
      const wrap = (queue: PostgresEventQueue, p: typeof pool) => {
        const close = queue.close.bind(queue);
        queue.close = async () => {
          await close();
          await p.end();
        };
        return queue;
      };
      return {
        queue: wrap(new PostgresEventQueue(pool, observer), pool),
        reopen: async () => {
          const again = createPool(url, 'production', { max: 4 });
          pools.push(again);
          return wrap(new PostgresEventQueue(again), again);
        },
      };
    },
  });
} else {
  test('PostgresEventQueue contract', pgOnly, () => undefined);
}

const append = (node: number, i: number, n: number): QueueAppend => ({
  requestId: `n${node}-r${i}`,
  keyId: 'key_test',
  dataSetId: `ds${i % 3}`,
  receivedAt: Date.now(),
  policyVersion: 1,
  mergeWindowMs: 604_800_000,
  events: Array.from({ length: n }, (_, j) => ({ data_set_id: `ds${i % 3}`, id: `n${node}-r${i}-e${j}`, timestamp: 1_700_000_000, event_type: 'purchase' })),
  metas: Array.from({ length: n }, () => undefined),
});

test('three queues on one database: sequence numbers are gapless and become visible in order', pgOnly, async () => {
  const { url, pool } = await freshPool();
  const nodes = [pool, createPool(url, 'production'), createPool(url, 'production')];
  const queues = nodes.map((p) => new PostgresEventQueue(p));
  let stop = false;
  const violations: string[] = [];
  // A reader polling like a consumer: everything it sees must be a prefix without holes.
  const reader = (async () => {
    let next = 1;
    while (!stop) {
      const records = await readSegments(pool, { fromSeq: next, limit: 10_000 });
      for (const r of records) {
        if (r.seq !== next) violations.push(`expected seq ${next}, saw ${r.seq}`);
        next = r.seq + 1;
      }
      await new Promise((r) => setTimeout(r, 2));
    }
    return next;
  })();
  const receipts = await Promise.all(
    queues.flatMap((q, node) => Array.from({ length: 150 }, (_, i) => q.append(append(node, i, 1 + (i % 4))))),
  );
  stop = true;
  await reader;
  assert.deepEqual(violations, []);
  const seqs = receipts.flatMap((r) => Array.from({ length: r.count }, (_, i) => r.firstSeq + i)).sort((a, b) => a - b);
  assert.deepEqual(seqs, Array.from({ length: seqs.length }, (_, i) => i + 1), 'gapless 1..N');
  for (const q of queues) await q.close();
  for (const p of nodes) await p.end();
});

/**
 * The reader pages by events, not by rows: a read of `limit` records fetches the event text of the
 * segments it needs and no more (the old page of up to 500 rows fetched and decoded whole 1,000-event
 * segments it did not use: ~30-80 µs per event of the consumer's CPU on this profile). Checked against
 * a reference of every record, for random segment sizes, erased events, start positions, limits and
 * partition filters; the event text fetched is counted on the real pool's results.
 */
test('readSegments returns exactly the records asked for and fetches only the segments it uses', pgOnly, async () => {
  const fc = (await import('fast-check')).default;
  const { PostgresQueueEraser } = await import('../../src/lifecycle/postgres-queue-eraser.js');
  const { queuePartitionOf } = await import('../../src/postgres/partitions.js');
  const { pool } = await freshPool();
  const queue = new PostgresEventQueue(pool);
  try {
    // 60 segments of 1..400 events over three data sets (two queue partitions or more), some raw bodies.
    const sizes = fc.sample(fc.integer({ min: 1, max: 400 }), { numRuns: 60, seed: 30 });
    for (let i = 0; i < sizes.length; i++) {
      const batch = append(7, i, sizes[i]!);
      const raw = i % 3 === 0 ? { rawBody: Buffer.from(JSON.stringify({ events: batch.events })) } : {};
      await queue.append({ ...batch, ...raw });
    }
    // Erase every 7th event of ds1 with the real eraser (null in the segment, raw rewritten as an array).
    await new PostgresQueueEraser(pool).erase(0, 'ds1', Number.MAX_SAFE_INTEGER, 0, 1_000, (_e, seq) => seq % 7 === 0);
    const all = await readSegments(pool, { fromSeq: 1, limit: 1_000_000 });
    assert.ok(all.every((r) => !(r.data_set_id === 'ds1' && r.seq % 7 === 0)), 'erased events are skipped');
    assert.ok(all.some((r) => r.data_set_id === 'ds1') && all.length < sizes.reduce((a, b) => a + b, 0), 'some events were erased');
    const lastSeq = all[all.length - 1]!.seq;

    // What each read fetched: rows carrying event text, on the real pool.
    let textRows = 0;
    const counting = {
      query: async (...args: Parameters<typeof pool.query>) => {
        const result = (await (pool.query as (...a: unknown[]) => Promise<{ rows: { events?: unknown }[] }>)(...args)) as { rows: { events?: unknown }[] };
        textRows += result.rows.filter((row) => row.events !== undefined).length;
        return result;
      },
    } as unknown as Pick<typeof pool, 'query'>;

    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: lastSeq + 5 }),
        fc.integer({ min: 1, max: 3_000 }),
        fc.constantFrom<'all' | 'part' | 'data set'>('all', 'part', 'data set'),
        async (fromSeq, limit, filter) => {
          const dataSetId = filter === 'data set' ? 'ds1' : undefined;
          const part = filter === 'part' ? queuePartitionOf('ds2') : undefined;
          const keep = (r: (typeof all)[number]) =>
            r.seq >= fromSeq && (dataSetId === undefined || r.data_set_id === dataSetId) && (part === undefined || queuePartitionOf(r.data_set_id) === part);
          const expected = all.filter(keep).slice(0, limit);
          textRows = 0;
          const got = await readSegments(counting, { fromSeq, limit, ...(dataSetId ? { dataSetId } : {}), ...(part !== undefined ? { part } : {}) });
          assert.deepEqual(got.map((r) => r.seq), expected.map((r) => r.seq));
          assert.deepEqual(got, expected);
          // The segments holding the records returned, plus at most the one that starts the read
          // (fromSeq inside it or before its events) and the erased events' share of a segment.
          const used = new Set(got.map((r) => r.request_id)).size;
          assert.ok(textRows <= used + 2, `fetched ${textRows} segments' text to return records of ${used}`);
        },
      ),
      { numRuns: 150, seed: 3030 },
    );
  } finally {
    await queue.close();
    await pool.end();
  }
});
