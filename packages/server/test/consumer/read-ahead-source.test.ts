/**
 * read-ahead-source.ts on its own: the next batch is read while the current one is applied, used
 * only for the very read it was made for and only when it found records. (In the worker on
 * PostgreSQL: the black-box suites of .ci/run's PostgreSQL phase, the lifecycle's erasures among them.)
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { readingAhead } from '../../src/consumer/read-ahead-source.js';
import type { QueueRecord } from '../../src/queue/event-queue.js';

/** A queue of records 1..n that grows when told, and the reads made of it. */
function queue(n: number) {
  const q = {
    last: n,
    reads: [] as { fromSeq: number; limit: number }[],
    fail: false,
    async read(fromSeq: number, limit: number): Promise<QueueRecord[]> {
      q.reads.push({ fromSeq, limit });
      if (q.fail) throw new Error('connection lost');
      const out: QueueRecord[] = [];
      for (let seq = fromSeq; seq <= q.last && out.length < limit; seq++) out.push({ seq } as QueueRecord);
      return out;
    },
  };
  return q;
}
const seqs = (records: readonly QueueRecord[]) => records.map((r) => r.seq);

test('the next batch is read while the current one is applied, and then served without a read', async () => {
  const q = queue(10);
  const source = readingAhead((f, l) => q.read(f, l));
  assert.deepEqual(seqs(await source.read(1, 4)), [1, 2, 3, 4]);
  assert.deepEqual(q.reads, [{ fromSeq: 1, limit: 4 }, { fromSeq: 5, limit: 4 }], 'the read-ahead starts at once');
  assert.deepEqual(seqs(await source.read(5, 4)), [5, 6, 7, 8]);
  assert.equal(source.used(), 1);
  assert.deepEqual(seqs(await source.read(9, 4)), [9, 10]);
  assert.equal(source.used(), 2);
});

test('a read-ahead made for another offset or limit is dropped', async () => {
  const q = queue(10);
  const source = readingAhead((f, l) => q.read(f, l));
  await source.read(1, 4); // reads ahead from 5
  assert.deepEqual(seqs(await source.read(3, 4)), [3, 4, 5, 6], 'another consumer moved the offset, or a rollback: read afresh');
  assert.equal(source.used(), 0);
  assert.deepEqual(seqs(await source.read(7, 2)), [7, 8], 'another limit: read afresh');
  assert.equal(source.used(), 0);
});

test('an empty read-ahead is not trusted: the read is made again and finds what came since', async () => {
  const q = queue(4);
  const source = readingAhead((f, l) => q.read(f, l));
  await source.read(1, 4); // reads ahead from 5: nothing yet
  q.last = 6; // appended after the read-ahead
  assert.deepEqual(seqs(await source.read(5, 4)), [5, 6]);
  assert.equal(source.used(), 0);
  // Caught up: the read-ahead of 7 (made after 5-6) found nothing, so 7 is read again; and an
  // empty read makes no read-ahead (an idle lane holds nothing).
  const before = q.reads.length;
  assert.deepEqual(seqs(await source.read(7, 4)), []);
  assert.deepEqual(q.reads.slice(before), [{ fromSeq: 7, limit: 4 }]);
  assert.deepEqual(seqs(await source.read(7, 4)), []);
  assert.deepEqual(q.reads.slice(before), [{ fromSeq: 7, limit: 4 }, { fromSeq: 7, limit: 4 }], 'no read-ahead after an empty read');
});

test('a failed read-ahead is forgotten: the read is made afresh', async () => {
  const q = queue(8);
  let failAt = 5;
  const source = readingAhead(async (f, l) => {
    if (f === failAt) {
      failAt = -1;
      throw new Error('connection lost');
    }
    return q.read(f, l);
  });
  await source.read(1, 4); // its read-ahead of 5 fails, and nothing is left unhandled
  assert.deepEqual(seqs(await source.read(5, 4)), [5, 6, 7, 8]);
  assert.equal(source.used(), 0);
});

test('model: whatever the reads asked, each returns the queue records from its offset, as a fresh read would', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.oneof(fc.record({ grow: fc.integer({ min: 0, max: 6 }) }), fc.record({ from: fc.integer({ min: 1, max: 30 }), limit: fc.integer({ min: 1, max: 5 }) }), fc.constant({ next: true })), { maxLength: 60 }),
      async (ops) => {
        const q = queue(3);
        const source = readingAhead((f, l) => q.read(f, l));
        let at = 1;
        for (const op of ops) {
          if ('grow' in op) q.last += op.grow;
          else {
            const [from, limit] = 'next' in op ? [at, 3] : [op.from, op.limit];
            const got = seqs(await source.read(from, limit));
            // A prefix of what a fresh read returns now (records appended after the read-ahead may
            // come with the next batch), and never empty when a fresh read would find records.
            const fresh: number[] = [];
            for (let seq = from; seq <= q.last && fresh.length < limit; seq++) fresh.push(seq);
            assert.deepEqual(got, fresh.slice(0, got.length));
            assert.ok(got.length > 0 || fresh.length === 0);
            if (got.length > 0) at = got[got.length - 1]! + 1;
          }
        }
      },
    ),
    { numRuns: 300 },
  );
});
