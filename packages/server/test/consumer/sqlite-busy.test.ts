/**
 * consumer/sqlite-busy.ts retryWhileBusy, as the worker's start uses it: SQLITE_BUSY and the errors
 * of `alsoWaitOut` (PostgreSQL unreachable) are waited out, said at the first failure and again
 * every `remindMs`; anything else is thrown at once; a stop ends the wait.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { retryWhileBusy, BUSY_RETRY_MESSAGE } from '../../src/consumer/sqlite-busy.js';
import { createLogger } from '../../src/observability/logger.js';
import { isDatabaseUnreachable } from '../../src/postgres/database-unreachable.js';

function capture() {
  const lines: { msg: string; tries: number; err: { code?: string; message: string } }[] = [];
  return { lines, logger: createLogger({ level: 'info', destination: { write: (text: string) => void lines.push(JSON.parse(text)) } }) };
}
const never = new Promise<void>(() => undefined);
const unreachable = { matches: isDatabaseUnreachable, message: 'the PostgreSQL database cannot be reached while the consumer starts; retrying' };
const refused = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });

test('an outage at the start: waited out, said once at the first failure (default reminder a minute)', async () => {
  const { lines, logger } = capture();
  let n = 0;
  const value = await retryWhileBusy(() => {
    if (++n <= 3) throw refused();
    return 'opened';
  }, { logger, stopped: never, step: 'opening the stores', alsoWaitOut: unreachable });
  assert.equal(value, 'opened');
  assert.equal(n, 4);
  assert.deepEqual(lines.map((l) => [l.msg, l.tries, l.err.code]), [[unreachable.message, 1, 'ECONNREFUSED']]);
});

test('while it keeps failing, the warning is said again every remindMs, with the tries so far', async () => {
  const { lines, logger } = capture();
  let n = 0;
  await retryWhileBusy(() => {
    if (++n <= 3) throw Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
    return true;
  }, { logger, stopped: never, step: 'opening the stores', remindMs: 0 });
  assert.deepEqual(lines.map((l) => [l.msg, l.tries]), [[BUSY_RETRY_MESSAGE, 1], [BUSY_RETRY_MESSAGE, 2], [BUSY_RETRY_MESSAGE, 3]]);
});

test('a configuration fault is thrown at once, not waited out', async () => {
  const { lines, logger } = capture();
  let n = 0;
  const noDatabase = Object.assign(new Error('database "nope" does not exist'), { code: '3D000' });
  await assert.rejects(
    retryWhileBusy(() => {
      n++;
      throw noDatabase;
    }, { logger, stopped: never, step: 'opening the stores', alsoWaitOut: unreachable }),
    (error) => error === noDatabase,
  );
  assert.equal(n, 1);
  assert.equal(lines.length, 0);
});

test('a stop ends the wait: undefined, no more tries', async () => {
  const { logger } = capture();
  let stop!: () => void;
  const stopped = new Promise<void>((resolve) => (stop = resolve));
  let n = 0;
  const result = retryWhileBusy(() => {
    if (++n === 2) stop();
    throw refused();
  }, { logger, stopped, step: 'opening the stores', alsoWaitOut: unreachable });
  assert.equal(await result, undefined);
  assert.equal(n, 2);
});
