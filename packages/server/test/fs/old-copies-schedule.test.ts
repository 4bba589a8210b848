/**
 * fs/old-copies-schedule.ts: after retention's deletions, the whole clearing (scrub, VACUUM) at most
 * once per interval; owed at start (a debt from before a restart is not forgotten); a try that did
 * not complete retried a minute later.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { OldCopiesSchedule, RETRY_MS } from '../../src/fs/old-copies-schedule.js';

const MIN = 60_000;

test('a new schedule is owed: the first round after a start clears once, then nothing until rows are deleted', () => {
  const s = new OldCopiesSchedule(15 * MIN);
  assert.equal(s.due(0), true);
  s.tried(0, true);
  assert.equal(s.owed, false);
  assert.equal(s.due(100 * MIN), false);
});

test('deletions at every round: cleared at most once per interval', () => {
  const s = new OldCopiesSchedule(15 * MIN);
  s.tried(0, true);
  const due: number[] = [];
  for (let minute = 1; minute <= 45; minute++) {
    s.deleted();
    if (s.due(minute * MIN)) {
      due.push(minute);
      s.tried(minute * MIN, true);
    }
  }
  assert.deepEqual(due, [15, 30, 45]);
});

test('a try that did not complete stays owed: tried again a minute later, doubling while it keeps failing, up to the interval', () => {
  const s = new OldCopiesSchedule(15 * MIN);
  s.deleted();
  let now = 0;
  const waits: number[] = [];
  for (let i = 0; i < 6; i++) {
    s.tried(now, false);
    assert.equal(s.owed, true);
    let next = now + 1;
    while (!s.due(next)) next += 1000;
    waits.push((next - now) / MIN);
    now = next;
  }
  assert.deepEqual(waits.map((w) => Math.round(w)), [1, 2, 4, 8, 15, 15]);
  assert.equal(RETRY_MS, MIN);
  s.tried(now, true);
  assert.equal(s.owed, false);
  assert.equal(s.due(now + 15 * MIN), false, 'nothing deleted since');
});

test('interval 0: due at every round that deleted, and only then', () => {
  const s = new OldCopiesSchedule(0);
  s.tried(5, true);
  assert.equal(s.due(5), false);
  s.deleted();
  assert.equal(s.due(5), true);
  s.tried(5, false);
  assert.equal(s.due(5), true, 'an interval shorter than the retry: the interval');
});
