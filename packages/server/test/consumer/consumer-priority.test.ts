/**
 * consumer/consumer-priority.ts against a fake process: which threads it lowers, that it never
 * raises one, and that a failure is one warning and never an exception (the real process:
 * worker-priority.test.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Logger } from '../../src/observability/logger.js';
import { lowerConsumerPriority, type PriorityHost } from '../../src/consumer/consumer-priority.js';

function systemError(code: string): Error {
  return Object.assign(new Error(`A system error occurred: uv_os_setpriority returned ${code}`), { code: 'ERR_SYSTEM_ERROR', info: { code } });
}

/**
 * A process whose threads have the given nice values. `onList` runs before each listing (threads
 * may start meanwhile); `ghosts` are listed but gone by the time they are asked (ESRCH).
 */
function fakeHost(
  nices: Map<number, number>,
  options: { platform?: NodeJS.Platform; refuse?: Set<number>; onList?: (pass: number) => void; noProc?: boolean; ghosts?: number[] } = {},
) {
  const set: [number, number][] = [];
  let pass = 0;
  const host: PriorityHost = {
    platform: options.platform ?? 'linux',
    threadIds: () => {
      if (options.noProc) throw Object.assign(new Error("ENOENT: no such file or directory, scandir '/proc/self/task'"), { code: 'ENOENT' });
      options.onList?.(pass++);
      return [...nices.keys(), ...(options.ghosts ?? [])];
    },
    getPriority: (id) => {
      const nice = nices.get(id);
      if (nice === undefined) throw systemError('ESRCH');
      return nice;
    },
    setPriority: (id, nice) => {
      if (options.refuse?.has(id)) throw systemError('EACCES');
      if (!nices.has(id)) throw systemError('ESRCH');
      set.push([id, nice]);
      nices.set(id, nice);
    },
  };
  return { host, set };
}

function recordingLogger() {
  const lines: { level: string; fields: Record<string, unknown>; msg: string }[] = [];
  const logger = {
    info: (fields: Record<string, unknown>, msg: string) => lines.push({ level: 'info', fields, msg }),
    warn: (fields: Record<string, unknown>, msg: string) => lines.push({ level: 'warn', fields, msg }),
  } as unknown as Logger;
  return { logger, lines };
}

test('Linux: every thread listed is lowered, one info line', () => {
  const nices = new Map([[100, 0], [101, 0], [102, 0]]);
  const { host, set } = fakeHost(nices);
  const { logger, lines } = recordingLogger();
  assert.equal(lowerConsumerPriority(10, logger, host), 3);
  assert.deepEqual(set, [[100, 10], [101, 10], [102, 10]]);
  assert.deepEqual(lines, [{ level: 'info', fields: { nice: 10, threads: 3 }, msg: 'consumer CPU priority lowered' }]);
});

test('a thread at that nice or nicer keeps its own: never raised', () => {
  const nices = new Map([[100, 0], [101, 15], [102, 10]]);
  const { host, set } = fakeHost(nices);
  const { logger } = recordingLogger();
  assert.equal(lowerConsumerPriority(10, logger, host), 1);
  assert.deepEqual(set, [[100, 10]]);
  assert.equal(nices.get(101), 15);
});

test('nice 0 leaves everything alone and logs nothing', () => {
  const { host, set } = fakeHost(new Map([[100, 0]]), { onList: () => assert.fail('no listing with nice 0') });
  const { logger, lines } = recordingLogger();
  assert.equal(lowerConsumerPriority(0, logger, host), 0);
  assert.deepEqual(set, []);
  assert.deepEqual(lines, []);
});

test('a thread started during the walk is lowered by the next pass; one that ended is no failure', () => {
  const nices = new Map([[100, 0], [101, 0]]);
  // 102 starts while the first list is walked; 103 is listed but ends before it is asked.
  const { host, set } = fakeHost(nices, { ghosts: [103], onList: (pass) => pass === 1 && void nices.set(102, 0) });
  const { logger, lines } = recordingLogger();
  assert.equal(lowerConsumerPriority(10, logger, host), 3);
  assert.deepEqual(set, [[100, 10], [101, 10], [102, 10]]);
  assert.deepEqual(lines.map((l) => l.level), ['info']);
});

test('a refusal is one warning, the other threads are still lowered, nothing is thrown', () => {
  const nices = new Map([[100, 0], [101, 0], [102, 0]]);
  const { host, set } = fakeHost(nices, { refuse: new Set([101, 102]) });
  const { logger, lines } = recordingLogger();
  assert.equal(lowerConsumerPriority(10, logger, host), 1);
  assert.deepEqual(set, [[100, 10]]);
  assert.equal(lines.length, 1);
  assert.equal(lines[0]!.level, 'warn');
  assert.deepEqual(lines[0]!.fields, { nice: 10, threads: 1, failed: 2, err: { message: 'setting a thread priority: A system error occurred: uv_os_setpriority returned EACCES' } });
});

test('no /proc: the calling thread is lowered (the threads it starts inherit it), with one warning', () => {
  const nices = new Map([[0, 0]]);
  const { host, set } = fakeHost(nices, { noProc: true });
  const { logger, lines } = recordingLogger();
  assert.equal(lowerConsumerPriority(10, logger, host), 1);
  assert.deepEqual(set, [[0, 10]]);
  assert.equal(lines.length, 1);
  assert.equal(lines[0]!.level, 'warn');
  assert.match(String((lines[0]!.fields.err as { message: string }).message), /^listing the threads/);
});

test('elsewhere than Linux: the process priority, once', () => {
  const nices = new Map([[0, 0]]);
  const { host, set } = fakeHost(nices, { platform: 'darwin', onList: () => assert.fail('no thread list off Linux') });
  const { logger, lines } = recordingLogger();
  assert.equal(lowerConsumerPriority(7, logger, host), 1);
  assert.deepEqual(set, [[0, 7]]);
  assert.deepEqual(lines, [{ level: 'info', fields: { nice: 7, threads: 1 }, msg: 'consumer CPU priority lowered' }]);
});
