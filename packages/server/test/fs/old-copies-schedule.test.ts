/**
 * fs/old-copies-schedule.ts: after retention's deletions, the whole clearing (scrub, VACUUM) at most
 * once per interval, a failed try waiting the interval again, nothing when nothing was deleted.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { OldCopiesSchedule } from '../../src/fs/old-copies-schedule.js';

const MIN = 60_000;

test('nothing deleted: never due', () => {
  const s = new OldCopiesSchedule(15 * MIN);
  assert.equal(s.due(0), false);
  assert.equal(s.due(100 * MIN), false);
});

test('the first deletion is cleared at once, later ones at most once per interval', () => {
  const s = new OldCopiesSchedule(15 * MIN);
  s.deleted();
  assert.equal(s.due(0), true);
  s.tried(0, true);
  assert.equal(s.owed, false);
  // Retention deletes at every round (each minute): the WAL only, until the interval has passed.
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

test('a try that did not complete waits the interval again, and stays owed', () => {
  const s = new OldCopiesSchedule(15 * MIN);
  s.deleted();
  s.tried(0, false);
  assert.equal(s.owed, true);
  assert.equal(s.due(MIN), false);
  assert.equal(s.due(15 * MIN), true);
});

test('interval 0: due at every round that deleted, and only then', () => {
  const s = new OldCopiesSchedule(0);
  s.deleted();
  assert.equal(s.due(5), true);
  s.tried(5, true);
  assert.equal(s.due(5), false);
  s.deleted();
  assert.equal(s.due(5), true);
});
