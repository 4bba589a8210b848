/**
 * consumer/lane-failure-log.ts: a failing spell of the consumer's lanes is said once per distinct
 * error, reminded every remindMs while it lasts, and ended with one "recovered" line (a clock of
 * the test's own: no timing).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LaneFailureLog, MAX_MESSAGES } from '../../src/consumer/lane-failure-log.js';
import { createLogger } from '../../src/observability/logger.js';

function capture() {
  const lines: { level: number; msg: string; [k: string]: unknown }[] = [];
  const logger = createLogger({ level: 'info', destination: { write: (text: string) => void lines.push(JSON.parse(text)) } });
  return { logger, lines, msgs: () => lines.map((l) => l.msg) };
}

test('sixteen lanes failing on the same outage: one line, then one recovery', () => {
  const { logger, lines, msgs } = capture();
  let now = 0;
  const log = new LaneFailureLog(logger, { now: () => now });
  for (let round = 0; round < 5; round++) {
    for (let lane = 0; lane < 16; lane++) log.failed(`p${lane}`, new Error('database "x" is not currently accepting connections'), 1000);
    now += 1000;
    log.check(16);
  }
  assert.equal(lines.length, 1, msgs().join('\n'));
  assert.match(lines[0]!.msg, /^consumer batch failed; retrying/);
  assert.equal(lines[0]!.partition, 'p0');
  log.check(0);
  assert.deepEqual(msgs().slice(1), ['consumer batches recovered']);
  assert.equal(lines[1]!.failed_batches_unsaid, 79);
  // Idle afterwards: nothing more is said.
  log.check(0);
  assert.equal(lines.length, 2);
});

test('a second, different error is said too, even while the first is latched; a new spell says both again', () => {
  const { logger, msgs, lines } = capture();
  const log = new LaneFailureLog(logger, { now: () => 0 });
  log.failed('p00', new Error('database is away'), 250);
  log.failed('p01', new Error('database is away'), 250);
  log.failed('p03', new Error('invalid input syntax'), 250);
  log.failed('p03', new Error('invalid input syntax'), 500);
  assert.deepEqual(lines.map((l) => (l.err as { message: string }).message), ['database is away', 'invalid input syntax']);
  log.check(0);
  log.failed('p00', new Error('database is away'), 250);
  assert.equal(msgs().filter((m) => m.startsWith('consumer batch failed')).length, 3);
});

test('a spell that lasts: a reminder every remindMs with the failed batches since the last line', () => {
  const { logger, lines } = capture();
  let now = 0;
  const log = new LaneFailureLog(logger, { remindMs: 60_000, now: () => now });
  log.failed('p00', new Error('disk full'), 30_000);
  for (let t = 1; t <= 12; t++) {
    now = t * 10_000;
    log.failed('p00', new Error('disk full'), 30_000);
    log.check(1);
  }
  const reminders = lines.filter((l) => l.msg === 'consumer batches still failing');
  assert.equal(reminders.length, 2, 'at 60 s and 120 s');
  assert.deepEqual(reminders.map((r) => [r.failing_lanes, r.failed_batches]), [[1, 6], [1, 6]]);
});

test('distinct messages are bounded per spell', () => {
  const { logger, lines } = capture();
  const log = new LaneFailureLog(logger, { now: () => 0 });
  for (let k = 0; k < MAX_MESSAGES + 5; k++) log.failed('p00', new Error(`error ${k}`), 250);
  assert.equal(lines.length, MAX_MESSAGES);
});
