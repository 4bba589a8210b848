/**
 * model/shared-next-run.ts: a caller never gets a run that started before its call; callers that
 * arrive while one runs share the next; a failed run rejects its callers only.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SharedNextRun } from '../../src/model/shared-next-run.js';

test('callers during a run share the next one, which starts after them; a burst costs two runs', async () => {
  let started = 0;
  let release!: () => void;
  const runs = new SharedNextRun(async () => {
    started++;
    await new Promise<void>((resolve) => (release = resolve));
  });
  const first = runs.run();
  await Promise.resolve();
  assert.equal(started, 1);
  const later = Array.from({ length: 10 }, () => runs.run());
  assert.ok(later.every((p) => p === later[0]), 'the ten share one run');
  assert.notEqual(later[0], first, 'never the run that had started before them');
  release();
  await first;
  await new Promise((r) => setImmediate(r));
  assert.equal(started, 2, 'their run started after the first ended');
  release();
  await Promise.all(later);
  await runs.settled();
  assert.equal(started, 2);
});

test('a failed run rejects the callers that shared it; the next run goes ahead', async () => {
  let fail = true;
  const runs = new SharedNextRun(async () => {
    if (fail) throw new Error('down');
  });
  await assert.rejects(runs.run(), /down/);
  await runs.settled();
  fail = false;
  await runs.run();
});
