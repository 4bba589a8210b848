/**
 * shared-partition-reads.ts on its own, over a queue partition in memory (its records at scattered
 * sequence numbers, as the other partitions' records leave gaps, growing while lanes read): every
 * read returns what a read of the lane's own would (a prefix of it, never empty when it is not),
 * the window keeps its bound, and lanes that go at one pace read each record once. (In the worker
 * on PostgreSQL: postgres-sharded-layout.test.ts and the lifecycle's model tests, whose lanes share
 * reads with a window of a few records.)
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { SharedPartitionReads } from '../../src/consumer/shared-partition-reads.js';
import type { QueueRecord } from '../../src/queue/event-queue.js';

/** A partition whose records sit at `seqs`, of which the first `visible` are committed; the records read from it. */
function partition(seqs: readonly number[], visible = seqs.length) {
  const p = {
    visible,
    recordsRead: 0,
    async read(fromSeq: number, limit: number): Promise<QueueRecord[]> {
      await new Promise<void>((resolve) => setImmediate(resolve));
      const out = p.ownRead(fromSeq, limit);
      p.recordsRead += out.length;
      return out;
    },
    /** What a lane's own read returns now. */
    ownRead(fromSeq: number, limit: number): QueueRecord[] {
      const out: QueueRecord[] = [];
      for (let i = 0; i < p.visible && out.length < limit; i++) if (seqs[i]! >= fromSeq) out.push({ seq: seqs[i]! } as QueueRecord);
      return out;
    },
  };
  return p;
}
const seqsOf = (records: readonly QueueRecord[]) => records.map((r) => r.seq);

test('every read is a lane\'s own read or a prefix of it, and never empty when that is not, whatever the lanes do', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.uniqueArray(fc.integer({ min: 1, max: 400 }), { minLength: 1, maxLength: 120 }).map((a) => a.sort((x, y) => x - y)),
      fc.integer({ min: 1, max: 12 }),
      fc.constantFrom(0, 1, 5),
      /** A lane not seen for this long is forgotten: 1 ms forgets lanes while their reads are in flight. */
      fc.constantFrom(1, 10_000),
      /** Per lane: its limit, and its moves (a read on, a jump back as after a rollback, a jump ahead). */
      fc.array(
        fc.record({
          limit: fc.integer({ min: 1, max: 10 }),
          moves: fc.array(fc.oneof({ arbitrary: fc.constant(0), weight: 6 }, fc.integer({ min: -20, max: 30 })), { minLength: 1, maxLength: 25 }),
        }),
        { minLength: 1, maxLength: 4 },
      ),
      fc.nat(),
      async (seqs, maxRecords, waitMs, liveMs, lanes, growth) => {
        const q = partition(seqs, Math.max(1, seqs.length - (growth % 20)));
        const reads = new SharedPartitionReads((f, l) => q.read(f, l), { maxRecords, waitMs, liveMs });
        const largestLimit = Math.max(...lanes.map((l) => l.limit));
        await Promise.all(
          lanes.map(async (lane, n) => {
            let at = 1;
            for (const move of lane.moves) {
              at = Math.max(1, at + move);
              const before = q.ownRead(at, lane.limit);
              const got = seqsOf(await reads.read(`lane${n}`, at, lane.limit));
              const after = q.ownRead(at, lane.limit);
              // Appends (below) land between: what came is a prefix of the lane's own read at its end.
              assert.deepEqual(got, seqsOf(after).slice(0, got.length), `lane ${n} from ${at}`);
              if (before.length > 0) assert.ok(got.length > 0, `lane ${n} from ${at}: nothing, with ${seqsOf(before)} there`);
              assert.ok(reads.held <= Math.max(maxRecords, largestLimit), `${reads.held} records held`);
              if (got.length > 0) at = got[got.length - 1]! + 1;
              if (q.visible < seqs.length && (at + n) % 3 === 0) q.visible++;
            }
          }),
        );
      },
    ),
    { numRuns: 300 },
  );
});

// The waits below have no end in a test's time; a fault that made a lane wait for ever fails here.
const HANG = { timeout: 60_000 };

test('lanes at different paces read each record from the database once, the faster waiting for the slower', HANG, async () => {
  const seqs = Array.from({ length: 600 }, (_, i) => 3 * i + 1);
  const q = partition(seqs);
  // A wait with no end in a test's time: what is asserted cannot depend on timing.
  const reads = new SharedPartitionReads((f, l) => q.read(f, l), { maxRecords: 16, waitMs: 3_600_000 });
  const drain = async (lane: string, limit: number, perRecordTicks: number) => {
    const got: number[] = [];
    for (let at = 1; ; ) {
      const records = await reads.read(lane, at, limit);
      if (records.length === 0) return got;
      got.push(...seqsOf(records));
      at = records[records.length - 1]!.seq + 1;
      // Applying the batch: the slow lane takes more turns of the event loop per record.
      for (let i = 0; i < records.length * perRecordTicks; i++) await new Promise<void>((resolve) => setImmediate(resolve));
    }
  };
  const [fast, slow] = await Promise.all([drain('shard', 8, 0), drain('identity', 4, 3)]);
  assert.deepEqual(fast, seqs);
  assert.deepEqual(slow, seqs);
  assert.equal(q.recordsRead, seqs.length, 'each record read from the database once');
  assert.equal(reads.counts.served, 2 * seqs.length);
  assert.equal(reads.held, 0, 'a caught-up partition holds nothing');
});

test('without waiting: a lane behind the window reads on its own, unless it is the slowest, which takes the window back', async () => {
  const q = partition([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  const reads = new SharedPartitionReads((f, l) => q.read(f, l), { maxRecords: 4, waitMs: 0 });
  assert.deepEqual(seqsOf(await reads.read('identity', 1, 2)), [1, 2]);
  assert.deepEqual(seqsOf(await reads.read('shard', 1, 2)), [1, 2]);
  assert.equal(q.recordsRead, 2, 'the second lane was served from the window');
  // Room for the shard's 4: what both lanes have read goes.
  assert.deepEqual(seqsOf(await reads.read('shard', 3, 4)), [3, 4, 5, 6]);
  assert.equal(q.recordsRead, 6);
  assert.equal(reads.held, 4);
  // The shard reads 2 again (a rolled-back batch): behind the window, with the identity part further
  // behind, so on its own; the window stays.
  assert.deepEqual(seqsOf(await reads.read('shard', 2, 1)), [2]);
  assert.equal(q.recordsRead, 7);
  assert.deepEqual(seqsOf(await reads.read('identity', 3, 2)), [3, 4]);
  assert.equal(q.recordsRead, 7, 'served');
  // The shard goes on with no wait: the window drops 3-6, which the identity part has not all read.
  assert.deepEqual(seqsOf(await reads.read('shard', 7, 4)), [7, 8, 9, 10]);
  assert.equal(q.recordsRead, 11);
  // The identity part, behind it and the slowest, takes the window back.
  assert.deepEqual(seqsOf(await reads.read('identity', 5, 2)), [5, 6]);
  assert.equal(q.recordsRead, 13);
  assert.equal(reads.held, 2);
  // The shard, past the window's end while the identity part reads inside it, reads on its own: the
  // window stays the identity part's.
  assert.deepEqual(seqsOf(await reads.read('shard', 11, 4)), []);
  assert.equal(reads.held, 2);
  assert.deepEqual(seqsOf(await reads.read('identity', 7, 2)), [7, 8]);
  assert.equal(q.recordsRead, 15);
});

test('a lane forgotten while its read is in flight still gets its records, though the window moved past it', async () => {
  let now = 0;
  const q = partition([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 8);
  let release: (() => void) | undefined;
  let gate: Promise<void> | undefined;
  const reads = new SharedPartitionReads(
    async (f, l) => {
      if (gate !== undefined) await gate;
      return q.read(f, l);
    },
    { maxRecords: 100, waitMs: 0, liveMs: 10_000, now: () => now },
  );
  assert.deepEqual(seqsOf(await reads.read('shard', 1, 5)), [1, 2, 3, 4, 5]);
  gate = new Promise<void>((resolve) => (release = resolve));
  const identity = reads.read('identity', 1, 10); // wants more than the window holds: a read at its end, held up
  await new Promise<void>((resolve) => setImmediate(resolve));
  now = 11_000; // the identity part's read began 11 s ago: the shard's next read forgets it
  gate = undefined;
  const shard = reads.read('shard', 6, 5);
  release!();
  assert.deepEqual(seqsOf(await identity), [1, 2, 3, 4, 5, 6, 7, 8], 'what its own read returns');
  assert.deepEqual(seqsOf(await shard), [6, 7, 8]);
});

test('a lane forgotten when its lease leaves the worker is not waited for, and the window goes with the last lane', HANG, async () => {
  const q = partition(Array.from({ length: 40 }, (_, i) => i + 1));
  const reads = new SharedPartitionReads((f, l) => q.read(f, l), { maxRecords: 8, waitMs: 3_600_000 });
  await reads.read('identity', 1, 2);
  assert.deepEqual(seqsOf(await reads.read('shard', 1, 8)), [1, 2, 3, 4, 5, 6, 7, 8]);
  reads.forget('identity');
  // Still counted, the identity part would hold this read up for an hour.
  assert.deepEqual(seqsOf(await reads.read('shard', 9, 8)), [9, 10, 11, 12, 13, 14, 15, 16]);
  assert.ok(reads.held > 0);
  reads.forget('shard');
  assert.equal(reads.held, 0, 'no lane left: nothing held');
});

test('a lane gone quiet is forgotten: the window is neither kept nor waited for on its account', HANG, async () => {
  let now = 0;
  const q = partition(Array.from({ length: 40 }, (_, i) => i + 1));
  const reads = new SharedPartitionReads((f, l) => q.read(f, l), { maxRecords: 8, waitMs: 3_600_000, liveMs: 10_000, now: () => now });
  await reads.read('gone', 1, 2); // its lease went to another worker: it never reads here again
  now = 20_000;
  // With 'gone' still counted, this read would wait (for an hour) for it to read on.
  assert.deepEqual(seqsOf(await reads.read('shard', 3, 8)), [3, 4, 5, 6, 7, 8, 9, 10]);
  assert.deepEqual(seqsOf(await reads.read('shard', 11, 8)), [11, 12, 13, 14, 15, 16, 17, 18]);
  assert.ok(reads.held <= 8);
});
