/**
 * The idle-lane rule of queue-head-watch.ts, on its own: a lane whose step found nothing steps again
 * only once its partition got segments since; one read serves every lane for `maxAgeMs`. (Against a
 * real PostgreSQL queue and worker: postgres-partitions.test.ts.)
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { QueueHeadWatch, skippingWhileIdle, type HeadRead } from '../../src/consumer/queue-head-watch.js';
import type { StepResult } from '../../src/consumer/view-consumer.js';

const result = (moved: boolean, records = 0): StepResult => ({ records, created: records, merged: 0, discarded: 0, nextSeq: 1, moved });

/** A partition whose steps report what `outcomes` says, in turn (then idle), counting the steps. */
function partition(outcomes: boolean[]) {
  const p = {
    steps: 0,
    name: 'p00',
    async step() {
      p.steps++;
      const moved = outcomes.shift() ?? false;
      return result(moved, moved ? 1 : 0);
    },
  };
  return p;
}

/** A queue of segments (first seq → partition) and its head, read as PostgreSQL would answer. */
function queue() {
  const q = {
    head: 1,
    segments: [] as { seq: number; part: number }[],
    append(part: number, events = 1) {
      q.segments.push({ seq: q.head, part });
      q.head += events;
    },
    async read(since: number): Promise<HeadRead> {
      return { head: q.head, parts: since < 0 ? null : [...new Set(q.segments.filter((s) => s.seq >= since && s.seq < q.head).map((s) => s.part))] };
    },
  };
  return q;
}

test('a lane whose step found nothing steps again only when its own partition got segments', async () => {
  const q = queue();
  const watch = new QueueHeadWatch((since) => q.read(since), 0); // no caching: every step reads
  const p = partition([true, false]);
  const lane = skippingWhileIdle(p, 3, watch);

  assert.equal((await lane.step()).moved, true);
  assert.equal((await lane.step()).moved, false); // found nothing: idle
  assert.equal(p.steps, 2);
  for (let i = 0; i < 3; i++) assert.deepEqual(await lane.step(), result(false)); // head unchanged
  q.append(5, 10); // another partition's segments
  await lane.step();
  q.append(7);
  await lane.step();
  assert.equal(p.steps, 2, 'appends to other partitions do not wake it');

  q.append(3, 4); // its own
  assert.equal((await lane.step()).moved, false); // steps once (this partition finds nothing here)
  assert.equal(p.steps, 3);
  await lane.step();
  assert.equal(p.steps, 3, 'idle again');
});

test('the first read names no partitions: a lane idle before any interval is known steps', async () => {
  const q = queue();
  q.append(1);
  const watch = new QueueHeadWatch((since) => q.read(since), 0);
  const p = partition([false]);
  const lane = skippingWhileIdle(p, 2, watch);
  await lane.step(); // idle at head 2 (the first read: nothing known about what came before)
  q.append(2);
  await lane.step(); // interval [2, 3) names partition 2
  assert.equal(p.steps, 2);
});

test('a lane idle since before the intervals kept steps (the history is bounded)', async () => {
  const q = queue();
  const watch = new QueueHeadWatch((since) => q.read(since), 0);
  const p = partition([]);
  const lane = skippingWhileIdle(p, 0, watch);
  await lane.step(); // idle at head 1
  // 100 reads of appends elsewhere while this lane does not ask (another lane asks).
  for (let i = 0; i < 100; i++) {
    q.append(1);
    await watch.head();
  }
  await lane.step();
  assert.equal(p.steps, 2, 'idle since before the 64 intervals kept: it steps');
  q.append(1);
  await lane.step();
  assert.equal(p.steps, 2, 'and is idle again at the new head');
});

test('a step that moved never lets the next one be skipped; a new lane steps first', async () => {
  const q = queue();
  const watch = new QueueHeadWatch((since) => q.read(since), 0);
  const p = partition([false, true, true, false]);
  const lane = skippingWhileIdle(p, 0, watch);
  await lane.step(); // idle
  await lane.step(); // skipped
  assert.equal(p.steps, 1);
  const again = skippingWhileIdle(p, 0, watch); // a partition leased again gets a new lane
  assert.equal((await again.step()).moved, true);
  assert.equal((await again.step()).moved, true);
  assert.equal((await again.step()).moved, false);
  assert.equal(p.steps, 4);
  await again.step();
  assert.equal(p.steps, 4);
});

test('one read serves every caller for maxAgeMs, and callers meanwhile share the read in flight', async () => {
  let now = 0;
  const q = queue();
  let release!: () => void;
  let gate = Promise.resolve();
  const watch = new QueueHeadWatch(
    async (since) => {
      await gate;
      return q.read(since);
    },
    50,
    () => now,
  );
  gate = new Promise<void>((r) => (release = r));
  const concurrent = [watch.head(), watch.head(), watch.head()];
  release();
  assert.deepEqual(await Promise.all(concurrent), [1, 1, 1]);
  assert.equal(watch.reads, 1);

  q.append(0);
  now = 49;
  assert.equal(await watch.head(), 1, 'within maxAgeMs: the value read at 0');
  assert.equal(watch.reads, 1);
  now = 50;
  assert.equal(await watch.head(), 2);
  assert.equal(watch.reads, 2);
});

test('a failed read fails the step and is not remembered', async () => {
  let fail = true;
  const q = queue();
  const watch = new QueueHeadWatch(async (since) => {
    if (fail) throw new Error('connection lost');
    return q.read(since);
  }, 1000);
  const p = partition([false]);
  const lane = skippingWhileIdle(p, 0, watch);
  await assert.rejects(lane.step(), /connection lost/);
  assert.equal(p.steps, 0);
  fail = false;
  assert.equal((await lane.step()).moved, false);
  assert.equal(p.steps, 1);
});

test('model: a lane never skips a step that would have found records of its partition', async () => {
  // Random appends over 4 partitions between the lanes' steps; a partition's "step" applies
  // everything of its own below the head read before it. Skipping is allowed only when the step
  // would have found nothing: at the end, with every lane stepped after the last append, every
  // partition has applied all of its segments.
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.oneof(fc.record({ append: fc.integer({ min: 0, max: 3 }), events: fc.integer({ min: 1, max: 5 }) }), fc.record({ step: fc.integer({ min: 0, max: 3 }) })), { maxLength: 80 }),
      async (ops) => {
        const q = queue();
        const watch = new QueueHeadWatch((since) => q.read(since), 0);
        const applied = [0, 0, 0, 0];
        const lanes = [0, 1, 2, 3].map((part) => {
          let offset = 1;
          return skippingWhileIdle(
            {
              name: `p${part}`,
              async step() {
                const head = q.head;
                const mine = q.segments.filter((s) => s.part === part && s.seq >= offset && s.seq < head);
                offset = head;
                applied[part]! += mine.length;
                return result(mine.length > 0, mine.length);
              },
            },
            part,
            watch,
          );
        });
        for (const op of ops) {
          if ('append' in op) q.append(op.append, op.events);
          else await lanes[op.step]!.step();
        }
        // Each lane steps until it reports idle (as the loop does), after the last append.
        for (const lane of lanes) while ((await lane.step()).moved);
        for (let part = 0; part < 4; part++) assert.equal(applied[part], q.segments.filter((s) => s.part === part).length, `partition ${part}`);
      },
    ),
    { numRuns: 300 },
  );
});

test('a lane held at a fence is not idle: it steps again without an append, and goes on once released', async () => {
  const q = queue();
  q.append(4, 10);
  const watch = new QueueHeadWatch((since) => q.read(since), 0);
  let fenced = true;
  const p = {
    steps: 0,
    name: 'p04/s0',
    async step(): Promise<StepResult> {
      p.steps++;
      // Held (the sharded layout's lifecycle, view-consumer.ts): nothing applied, more to apply past the fence.
      return fenced ? { ...result(false), held: true } : result(true, 10);
    },
  };
  const lane = skippingWhileIdle(p, 4, watch);
  for (let i = 0; i < 3; i++) assert.equal((await lane.step()).held, true);
  assert.equal(p.steps, 3, 'every step of a held lane reaches the consumer');
  fenced = false; // released; nothing was appended meanwhile
  assert.equal((await lane.step()).moved, true);
  assert.equal(p.steps, 4);
});
