import { test } from 'node:test';
import assert from 'node:assert/strict';
import { errors as undiciErrors } from 'undici';
import { backoffDelayMs, classifyStatus, describeNetworkError, isRetryableNetworkError, MAX_TIMER_MS, networkFailure, parseRetryAfterMs, retryDelayMs } from '../src/index.js';

test('status classes follow the retry guidance', () => {
  assert.equal(classifyStatus(200), 'done');
  assert.equal(classifyStatus(207), 'done');
  assert.equal(classifyStatus(429), 'rate-limited');
  for (const s of [500, 502, 503, 504, 408]) assert.equal(classifyStatus(s), 'retry', String(s));
  for (const s of [400, 401, 403, 404, 413]) assert.equal(classifyStatus(s), 'refused', String(s));
});

test('full jitter: uniform in [0, min(cap, base * 2^retry))', () => {
  const o = { baseMs: 100, maxMs: 1000 };
  assert.equal(backoffDelayMs(0, o, () => 0), 0);
  assert.equal(backoffDelayMs(0, o, () => 0.999999), 99);
  assert.equal(backoffDelayMs(1, o, () => 0.5), 100);
  assert.equal(backoffDelayMs(3, o, () => 0.999999), 799);
  assert.equal(backoffDelayMs(4, o, () => 0.999999), 999, 'capped');
  assert.equal(backoffDelayMs(1000, o, () => 0.5), 500, 'no overflow');
  for (let i = 0; i < 1000; i++) {
    const d = backoffDelayMs(2, o);
    assert.ok(d >= 0 && d < 400);
  }
});

test('Retry-After: delay-seconds or HTTP-date', () => {
  assert.equal(parseRetryAfterMs('3'), 3000);
  assert.equal(parseRetryAfterMs(' 0 '), 0);
  assert.equal(parseRetryAfterMs(['2', '9']), 2000);
  assert.equal(parseRetryAfterMs('1.5'), 1500);
  const now = Date.parse('2025-05-06T19:07:44Z');
  assert.equal(parseRetryAfterMs('Tue, 06 May 2025 19:07:49 GMT', now), 5000);
  assert.equal(parseRetryAfterMs('Tue, 06 May 2025 19:07:00 GMT', now), 0, 'a date in the past means now');
  assert.equal(parseRetryAfterMs(undefined), undefined);
  assert.equal(parseRetryAfterMs('soon'), undefined);
  assert.equal(parseRetryAfterMs('-1'), undefined);
});

test('network errors are retried, certificate failures are not', () => {
  const reset = Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' });
  assert.equal(isRetryableNetworkError(reset), true);
  assert.equal(isRetryableNetworkError(Object.assign(new Error('x'), { code: 'ECONNREFUSED' })), true);
  const cert = Object.assign(new Error('fetch failed'), { cause: Object.assign(new Error('self-signed certificate'), { code: 'DEPTH_ZERO_SELF_SIGNED_CERT' }) });
  assert.equal(isRetryableNetworkError(cert), false);
  assert.match(describeNetworkError(cert), /DEPTH_ZERO_SELF_SIGNED_CERT/);
  assert.match(describeNetworkError(reset), /^network error: UND_ERR_SOCKET/);
  assert.match(describeNetworkError(new DOMException('The operation timed out', 'TimeoutError')), /^time-out/);
});

test('retry delay: Retry-After capped (default 60 s), jittered under the cap, never below the backoff, always a keepable timer', () => {
  const none = () => 0;
  const most = () => 0.999;
  assert.equal(retryDelayMs(undefined, 123), 123, 'no Retry-After: the backoff');
  assert.equal(retryDelayMs(3000, 100, 60_000, none), 3000);
  assert.equal(retryDelayMs(3000, 100, 60_000, most), 3299, 'up to 10% jitter above');
  assert.equal(retryDelayMs(3_000_000_000, 100, undefined, none), 60_000, 'Retry-After: 3000000 (s) is capped at 60 s');
  assert.equal(retryDelayMs(3_000_000_000, 100, 60_000, most), 59_001, 'at the cap the jitter goes below it');
  assert.equal(retryDelayMs(86_400_000, 100, 5000, none), 5000, 'a day, capped by the option');
  assert.equal(retryDelayMs(59_900, 0, 60_000, most), 60_000, 'jitter never pushes past the cap');
  assert.equal(retryDelayMs(Number.POSITIVE_INFINITY, 0, 60_000, none), 60_000);
  assert.equal(retryDelayMs(0, 250, 60_000, none), 250, 'Retry-After: 0 waits the backoff');
  assert.equal(retryDelayMs(10, 250, 60_000, most), 250);
  assert.equal(retryDelayMs(1000, 20_000, 5000, none), 20_000, 'a cap below the backoff does not make retries faster');
  assert.ok(retryDelayMs(Number.MAX_VALUE, Number.MAX_VALUE, Number.MAX_VALUE, none) <= MAX_TIMER_MS);
});

test('undici\'s time-outs (response head, body, connect) are TIMEOUT, retried, not NETWORK', () => {
  for (const error of [new undiciErrors.HeadersTimeoutError(), new undiciErrors.BodyTimeoutError(), new undiciErrors.ConnectTimeoutError(), Object.assign(new Error('connect ETIMEDOUT'), { code: 'ETIMEDOUT' })]) {
    const failure = networkFailure(error);
    assert.equal(failure.code, 'TIMEOUT', `${error.name}: ${JSON.stringify(failure)}`);
    assert.match(failure.message, /^time-out: /);
    assert.equal(isRetryableNetworkError(error), true);
  }
  assert.equal(networkFailure(new DOMException('The operation was aborted due to timeout', 'TimeoutError')).code, 'TIMEOUT');
  assert.equal(networkFailure(Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' })).code, 'NETWORK');
});
