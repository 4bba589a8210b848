/**
 * The idle-lane rule of queue-head-watch.ts, on its own: a lane whose step found nothing steps again
 * only once the queue's head moved; one head read serves every lane for `maxAgeMs`. (Against a real
 * PostgreSQL queue and worker: postgres-partitions.test.ts.)
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { QueueHeadWatch, skippingWhileIdle } from '../../src/consumer/queue-head-watch.js';
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

test('a lane whose step found nothing does not step again until the head moves', async () => {
  let head = 10;
  const watch = new QueueHeadWatch(async () => head, 0); // no caching: every step reads the head
  const p = partition([true, true, false]);
  const lane = skippingWhileIdle(p, watch);

  assert.equal((await lane.step()).moved, true);
  assert.equal((await lane.step()).moved, true);
  assert.equal((await lane.step()).moved, false); // found nothing at head 10
  assert.equal(p.steps, 3);
  for (let i = 0; i < 5; i++) assert.deepEqual(await lane.step(), result(false)); // head still 10: answered without a step
  assert.equal(p.steps, 3);

  head = 12; // an append somewhere
  assert.equal((await lane.step()).moved, false); // steps once, finds nothing of its own
  assert.equal(p.steps, 4);
  await lane.step();
  assert.equal(p.steps, 4, 'idle again at head 12');
});

test('a step that moved never lets the next one be skipped, whatever the head', async () => {
  const watch = new QueueHeadWatch(async () => 5, 0);
  const p = partition([false, true, true, false]);
  const lane = skippingWhileIdle(p, watch);
  await lane.step(); // idle at 5
  await lane.step(); // skipped: head still 5
  assert.equal(p.steps, 1);
  // A partition newly leased gets a new lane, which steps first even at an unchanged head.
  const again = skippingWhileIdle(p, watch);
  assert.equal((await again.step()).moved, true);
  assert.equal((await again.step()).moved, true);
  assert.equal((await again.step()).moved, false);
  assert.equal(p.steps, 4);
  await again.step();
  assert.equal(p.steps, 4);
});

test('one head read serves every caller for maxAgeMs, and callers meanwhile share the read in flight', async () => {
  let now = 0;
  let head = 1;
  let release!: () => void;
  let gate = Promise.resolve();
  const watch = new QueueHeadWatch(
    async () => {
      await gate;
      return head;
    },
    50,
    () => now,
  );
  gate = new Promise<void>((r) => (release = r));
  const concurrent = [watch.head(), watch.head(), watch.head()];
  release();
  assert.deepEqual(await Promise.all(concurrent), [1, 1, 1]);
  assert.equal(watch.reads, 1);

  head = 2;
  now = 49;
  assert.equal(await watch.head(), 1, 'within maxAgeMs: the value read at 0');
  assert.equal(watch.reads, 1);
  now = 50;
  assert.equal(await watch.head(), 2);
  assert.equal(watch.reads, 2);
});

test('a failed head read fails the step and is not remembered', async () => {
  let fail = true;
  const watch = new QueueHeadWatch(async () => {
    if (fail) throw new Error('connection lost');
    return 3;
  }, 1000);
  const p = partition([false]);
  const lane = skippingWhileIdle(p, watch);
  await assert.rejects(lane.step(), /connection lost/);
  assert.equal(p.steps, 0);
  fail = false;
  assert.equal((await lane.step()).moved, false);
  assert.equal(p.steps, 1);
});
