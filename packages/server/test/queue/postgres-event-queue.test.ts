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
