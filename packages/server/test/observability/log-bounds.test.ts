/**
 * What bounds the log under attack (observability/logger.ts; audit: one line per unauthenticated
 * request, and an unbounded buffer when stdout stalls):
 * - lines of requests refused before authentication are aggregated per reason: the first of each
 *   window in full, the rest counted in one line when the window ends (mocked timers: no waiting);
 *   authenticated requests keep one line each;
 * - with stdout stalled (a real pipe nobody reads), the buffer stops at MAX_BUFFERED_LOG_BYTES, the
 *   lines past it are dropped and counted, and a warning with the count is logged once stdout drains.
 */
import { test, mock } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createLogger, requestLineWriter, MAX_BUFFERED_LOG_BYTES, type RequestLogLine } from '../../src/observability/logger.js';
import { waitFor } from '../helpers/fault-tools.js';

function captured() {
  const lines: string[] = [];
  const logger = createLogger({ destination: { write: (text: string) => void lines.push(text) } });
  return { logger, lines: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>) };
}

const refusal = (status: number, error_code: string | undefined, i: number): RequestLogLine => ({
  request_id: `r-${status}-${i}`, status, data_set_id: undefined, key_id: undefined, accepted: 0, rejected: 0, error_code, latency_ms: 0.1, http: '2.0',
});
const signed = (i: number): RequestLogLine => ({
  request_id: `ok-${i}`, status: 200, data_set_id: 'shop', key_id: 'key_1', accepted: 1, rejected: 0, error_code: undefined, latency_ms: 0.5, http: '2.0',
});

test('refusals before authentication: first of each window per reason in full, the rest counted; signed requests one line each', () => {
  mock.timers.enable({ apis: ['setTimeout'] });
  try {
    const { logger, lines } = captured();
    const write = requestLineWriter(logger);
    for (let i = 0; i < 1000; i++) write(refusal(401, 'UNAUTHORIZED', i));
    for (let i = 0; i < 500; i++) write(refusal(429, 'RATE_LIMITED', i));
    for (let i = 0; i < 20; i++) write(refusal(404, undefined, i));
    for (let i = 0; i < 3; i++) write(signed(i));
    // Authenticated 4xx (a verified key id) are not refusals before authentication: one line each.
    write({ ...signed(9), status: 429, error_code: 'RATE_LIMITED' });
    let all = lines();
    assert.equal(all.length, 3 + 3 + 1, 'one line per reason so far, plus every signed request');
    assert.deepEqual(all.filter((l) => l.status === 401).map((l) => l.request_id), ['r-401-0'], 'the first refusal in full, with its request id');
    assert.equal(all.filter((l) => l.msg === 'request' && l.key_id === 'key_1').length, 4);

    mock.timers.tick(1000);
    all = lines();
    const summaries = all.filter((l) => l.msg === 'requests refused before authentication');
    assert.deepEqual(
      summaries.map((l) => [l.status, l.error_code, l.count]).sort(),
      [[401, 'UNAUTHORIZED', 999], [404, undefined, 19], [429, 'RATE_LIMITED', 499]].sort(),
    );
    // A new window: the next refusal is logged in full again; a reason seen once gets no count line.
    write(refusal(401, 'UNAUTHORIZED', 1000));
    mock.timers.tick(1000);
    const after = lines().slice(all.length);
    assert.deepEqual(after.map((l) => l.request_id), ['r-401-1000']);
    // Nothing of a request beyond the closed set of fields.
    for (const l of lines()) for (const key of Object.keys(l)) assert.ok(['level', 'time', 'service', 'msg', 'request_id', 'status', 'data_set_id', 'key_id', 'accepted', 'rejected', 'error_code', 'latency_ms', 'http', 'count', 'window_ms'].includes(key), key);
  } finally {
    mock.timers.reset();
  }
});

test('stdout stalled: the buffer stops at its bound, lines past it are dropped and counted, and reported once stdout drains', { timeout: 60_000 }, async () => {
  const loggerUrl = pathToFileURL(fileURLToPath(new URL('../../src/observability/logger.js', import.meta.url))).href;
  // 24 MiB of 1 KiB lines in one synchronous burst into a pipe nobody reads yet.
  const script = `
    import { createLogger, droppedLogLines } from ${JSON.stringify(loggerUrl)};
    const logger = createLogger();
    const filler = 'x'.repeat(1000);
    for (let i = 0; i < 24 * 1024; i++) logger.info({ i, filler }, 'line');
    process.stderr.write(JSON.stringify({ dropped: droppedLogLines() }) + '\\n');
    setInterval(() => {}, 1000);
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ECAPI_LOG_LEVEL: 'info' } });
  try {
    child.stdout!.pause();
    let err = '';
    child.stderr!.setEncoding('utf8').on('data', (t: string) => (err += t));
    const report = await waitFor('the child to report', () => (err.includes('\n') ? (JSON.parse(err.split('\n')[0]!) as { dropped: number }) : undefined), 30_000, 50);
    // At most MAX_BUFFERED_LOG_BYTES held: of ~24,600 lines of ~1,070 bytes, at most ~7,850 kept.
    const kept = 24 * 1024 - report.dropped;
    assert.ok(report.dropped > 0, 'lines past the bound are dropped (and counted)');
    assert.ok(kept * 1000 <= MAX_BUFFERED_LOG_BYTES, `kept ${kept} lines`);
    // stdout drains: a warning says how many lines were lost.
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (t: string) => (out += t));
    child.stdout!.resume();
    const notice = await waitFor('the dropped-lines warning', () => {
      const line = out.split('\n').find((l) => l.includes('log lines dropped'));
      return line ? (JSON.parse(line) as { dropped_lines_total: number; level: number }) : undefined;
    }, 30_000, 50);
    assert.ok(notice.dropped_lines_total >= report.dropped);
    assert.equal(notice.level, 40);
  } finally {
    child.kill('SIGKILL');
    await once(child, 'exit').catch(() => {});
  }
});
