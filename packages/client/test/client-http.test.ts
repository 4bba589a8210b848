/**
 * The Client's HTTP behaviour against a scripted loopback HTTPS server (test/helpers/https-test-server.ts):
 * the exact signed bytes, plain 400 never retried, 5xx and time-outs retried with backoff, 429
 * without Retry-After backed off, retries exhausted -> undeliverable.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client, sign } from '../src/index.js';
import { scripted } from './helpers/https-test-server.js';

const ev = (id: string) => ({ id, timestamp: 1746558464, event_type: 'page_view' as const });

test('the body sent is the body signed, with the spec\'s headers', async () => {
  const s = await scripted([{ status: 200, body: { accepted: 2 } }]);
  const c = s.client();
  try {
    const r = await c.send([ev('a'), ev('b')]);
    assert.equal(r.accepted, 2);
    const { headers, body } = s.seen[0]!;
    assert.equal(body.toString(), '{"events":[{"data_set_id":"ds","id":"a","timestamp":1746558464,"event_type":"page_view"},{"data_set_id":"ds","id":"b","timestamp":1746558464,"event_type":"page_view"}]}');
    assert.equal(headers['x-service-signature'], sign(body, 'sk_1'));
    assert.equal(headers['x-service-key-id'], 'key_1');
    assert.equal(headers['x-service-data-set'], 'ds');
    assert.equal(headers['content-type'], 'application/json');
    assert.equal(headers.accept, 'application/json');
  } finally {
    await c.close();
    await s.close();
  }
});

test('a plain 400 is not retried; the request-level error is every event\'s error', async () => {
  const s = await scripted([{ status: 400, body: { error: 'payload must be an object or {events:[...]}' } }]);
  const c = s.client();
  try {
    const r = await c.send([ev('a'), ev('b')]);
    assert.deepEqual([r.rejected, r.requests, r.retries, s.seen.length], [2, 1, 0, 1]);
    assert.ok(r.results.every((x) => x.status === 'rejected' && x.httpStatus === 400 && x.error.code === 'REQUEST_REJECTED' && x.error.message === 'payload must be an object or {events:[...]}'));
  } finally {
    await c.close();
    await s.close();
  }
});

test('503 and a time-out are retried with the same bytes; then accepted', async () => {
  const s = await scripted([{ status: 503, body: { error: 'busy' } }, { status: 200, delayMs: 1000 }, { status: 200, body: { accepted: 1 } }]);
  const c = s.client({ timeoutMs: 200 });
  try {
    const r = await c.send([ev('a')]);
    assert.deepEqual([r.accepted, r.retries], [1, 2], JSON.stringify(r.results));
    await new Promise((resolve) => setTimeout(resolve, 900)); // the delayed request has arrived too
    assert.equal(new Set(s.seen.map((x) => x.body.toString())).size, 1, 'every attempt sent the same bytes');
    assert.equal(new Set(s.seen.map((x) => x.headers['x-service-signature'])).size, 1);
  } finally {
    await c.close();
    await s.close();
  }
});

test('429 without Retry-After backs off; retries exhausted leave events undeliverable with the last error', async () => {
  const s = await scripted([{ status: 429, body: { error: 'rate limit exceeded: requests per second' } }, { status: 500, body: { error: 'ingest backend unavailable' } }]);
  const c = s.client({ maxRetries: 2 });
  try {
    const r = await c.send([ev('a')]);
    assert.equal(r.undeliverable, 1);
    const x = r.results[0]!;
    assert.ok(x.status === 'undeliverable' && x.error.code === 'SERVER_ERROR' && x.error.message === '500 ingest backend unavailable' && x.attempts === 4, JSON.stringify(x));
    assert.deepEqual((x as { event: unknown }).event, { data_set_id: 'ds', ...ev('a') });
  } finally {
    await c.close();
    await s.close();
  }
});

test('a missing option is refused', () => {
  assert.throws(() => new Client({ baseUrl: 'https://x', keyId: '', secret: 's', dataSetId: 'd' }), /keyId is required/);
});

test('retry and time-out options that would retry forever, at once, or abort every attempt are refused', () => {
  const base = { baseUrl: 'https://127.0.0.1:1', keyId: 'k', secret: 's', dataSetId: 'd' };
  for (const bad of [Number.NaN, -1, 1.5, Number.POSITIVE_INFINITY, '3' as unknown as number]) {
    assert.throws(() => new Client({ ...base, maxRetries: bad }), /^TypeError: Client: maxRetries must be an integer from 0 \(no retries\) up$/, String(bad));
    assert.throws(() => new Client({ ...base, maxRateLimitRetries: bad }), /maxRateLimitRetries must be an integer/, String(bad));
  }
  for (const bad of [0, Number.NaN, -5, Number.POSITIVE_INFINITY]) {
    assert.throws(() => new Client({ ...base, timeoutMs: bad }), /^TypeError: Client: timeoutMs must be a number of ms from 1 to 1073741823$/, String(bad));
    if (bad !== 0) assert.throws(() => new Client({ ...base, backoff: { baseMs: bad } }), /^TypeError: Client: backoff\.baseMs must be a number of ms from 0/, String(bad));
  }
  assert.throws(() => new Client({ ...base, backoff: { maxMs: Number.NaN } }), /backoff\.maxMs/);
  for (const ok of [{ maxRetries: 0 }, { maxRateLimitRetries: 0 }, { timeoutMs: 1 }, { backoff: { baseMs: 0 } }, { backoff: { baseMs: undefined, maxMs: 5 } }]) {
    void new Client({ ...base, ...ok }).close();
  }
});

test('a key id or data set with a newline or surrounding space is refused at construction, without echoing it', () => {
  const base = { baseUrl: 'https://127.0.0.1:1', keyId: 'k', secret: 's', dataSetId: 'd' };
  for (const keyId of ['key_1\n', ' key_1', 'key\r\n1', 'kéy']) {
    assert.throws(() => new Client({ ...base, keyId }), (e: Error) => e instanceof TypeError && e.message === 'Client: keyId must be printable ASCII without leading or trailing whitespace (it is sent as the X-Service-Key-Id header); check for a trailing newline');
  }
  assert.throws(() => new Client({ ...base, dataSetId: 'shop\n' }), /^TypeError: Client: dataSetId must be printable ASCII .* X-Service-Data-Set header/);
  void new Client({ ...base, keyId: 'key_1:a b', dataSetId: 'acme-web.eu:1' }).close();
});

test('a redirect is a request-level WRONG_URL naming where it pointed; nothing is followed or rejected', async () => {
  const s = await scripted([{ status: 308, headers: { location: 'https://elsewhere.example/v1/events' } }]);
  const c = s.client({ maxEventsPerRequest: 1, concurrency: 1 });
  try {
    const r = await c.send([ev('a'), ev('b')]);
    assert.deepEqual([r.rejected, r.undeliverable, r.requests, s.seen.length], [0, 2, 1, 1]);
    assert.equal(r.failure?.code, 'WRONG_URL');
    assert.equal(r.failure?.httpStatus, 308);
    assert.equal(r.failure?.detail, '308 redirect to https://elsewhere.example/v1/events, not followed');
    assert.match(r.failure!.message, new RegExp(`nothing answers POST ${s.baseUrl.replace(/\./g, '\\.')}/v1/events: baseUrl must be`));
  } finally {
    await c.close();
    await s.close();
  }
});

test('only a 207 or a 400 is read as per-event results: a 401 with an errors list still stops the send', async () => {
  const s = await scripted([{ status: 401, body: { accepted: 0, rejected: 1, errors: [{ index: 0, event_id: 'a', error: 'principal not authorized for data_set_id other' }] } }]);
  const c = s.client({ maxEventsPerRequest: 1, concurrency: 1 });
  try {
    const r = await c.send([ev('a'), ev('b')]);
    assert.deepEqual([r.rejected, r.undeliverable, s.seen.length], [0, 2, 1], JSON.stringify(r.results));
    assert.equal(r.failure?.httpStatus, 401);
  } finally {
    await c.close();
    await s.close();
  }
});

test('a response that does not come within timeoutMs is reported as TIMEOUT', async () => {
  const s = await scripted([{ status: 200, delayMs: 6000 }]);
  const c = s.client({ timeoutMs: 2000, maxRetries: 0 });
  try {
    const r = await c.send([ev('a')]);
    const x = r.results[0]!;
    assert.ok(x.status === 'undeliverable' && x.error.code === 'TIMEOUT', JSON.stringify(x));
    assert.match(x.error.message, /^time-out: /);
  } finally {
    await c.close();
    await s.close();
  }
});

test('an onRetry or onProgress that throws does not stop the send: every result comes back, and the error is rethrown outside it', async () => {
  const s = await scripted([{ status: 503, body: { error: 'busy' } }, { status: 200, body: { accepted: 1 } }]); // one event per request (maxEventsPerRequest: 1)
  const thrown: unknown[] = [];
  // The rethrow is an uncaught exception (as from an event handler): caught here instead of by the test runner.
  const runners = process.listeners('uncaughtException');
  process.removeAllListeners('uncaughtException');
  process.on('uncaughtException', (error) => thrown.push(error));
  const c = s.client({
    maxEventsPerRequest: 1,
    backoff: { baseMs: 1, maxMs: 5 },
    onRetry: () => {
      throw new Error('onRetry broke');
    },
    onProgress: () => {
      throw new Error('onProgress broke');
    },
  });
  try {
    const r = await c.send([ev('a'), ev('b')]);
    assert.deepEqual([r.accepted, r.undeliverable, r.retries], [2, 0, 1], JSON.stringify(r.results));
    await new Promise((resolve) => setImmediate(resolve));
    const messages = thrown.map((e) => (e as Error).message);
    assert.ok(messages.includes('onRetry broke') && messages.includes('onProgress broke'), messages.join(', '));
  } finally {
    process.removeAllListeners('uncaughtException');
    for (const listener of runners) process.on('uncaughtException', listener);
    await c.close();
    await s.close();
  }
});

test('retryDeadlineMs: a retry whose wait would end past it is not made; without it the same answers are retried', async () => {
  // A 429 asking for 5 s, then a 503 whose backoff (random 0.99 of 10 s) is 9.9 s: both past a 1 s deadline.
  for (const first of [
    { status: 429, body: { error: 'rate limit exceeded: events per second' }, headers: { 'retry-after': '5' } },
    { status: 503, body: { error: 'ingest backend unavailable' } },
  ]) {
    const s = await scripted([first, { status: 200, body: { accepted: 1 } }]);
    const c = s.client({ retryDeadlineMs: 1_000, backoff: { baseMs: 10_000, maxMs: 10_000 }, random: () => 0.99 });
    try {
      const r = await c.send([ev('a')]);
      assert.equal(r.undeliverable, 1, JSON.stringify(r.results));
      const x = r.results[0]!;
      assert.ok(x.status === 'undeliverable' && x.attempts === 1, JSON.stringify(x));
      assert.equal(x.error.code, first.status === 429 ? 'RATE_LIMITED' : 'SERVER_ERROR');
      assert.match(x.error.message, /^(429|503) .*\(not retried: the next attempt would start after retryDeadlineMs, 1000 ms\)$/);
      assert.equal(s.seen.length, 1, 'one attempt');
    } finally {
      await c.close();
      await s.close();
    }
  }
  // A deadline the wait fits in: retried and accepted.
  const s = await scripted([{ status: 503, body: { error: 'busy' } }, { status: 200, body: { accepted: 1 } }]);
  const c = s.client({ retryDeadlineMs: 5_000, backoff: { baseMs: 100, maxMs: 100 } });
  try {
    const r = await c.send([ev('a')]);
    assert.deepEqual([r.accepted, r.retries], [1, 1]);
  } finally {
    await c.close();
    await s.close();
  }
  assert.throws(() => s.client({ retryDeadlineMs: Number.NaN }), /^TypeError: Client: retryDeadlineMs must be a number of ms from 0/);
});

test('send with a signal: aborted mid-send, what was accepted stays accepted, the request in flight and those not sent are undeliverable with ABORTED', async () => {
  // Request 0 is answered at once; request 1 is held until the abort; requests 2-3 never start (concurrency 1).
  const controller = new AbortController();
  const s = await scripted((_seen, n) => {
    if (n === 1) setTimeout(() => controller.abort(), 50);
    return n === 1 ? { status: 200, body: { accepted: 1 }, delayMs: 5_000 } : { status: 200, body: { accepted: 1 } };
  });
  const c = s.client({ maxEventsPerRequest: 1, concurrency: 1 });
  try {
    const r = await c.send([ev('a'), ev('b'), ev('c'), ev('d')], { signal: controller.signal });
    assert.deepEqual(r.results.map((x) => x.status), ['accepted', 'undeliverable', 'undeliverable', 'undeliverable'], JSON.stringify(r.results));
    const [, inFlight, unsent] = r.results as { error: { code: string; message: string } }[];
    assert.equal(inFlight!.error.code, 'ABORTED');
    assert.match(inFlight!.error.message, /in flight: it may or may not have been stored/);
    assert.equal(unsent!.error.code, 'ABORTED');
    assert.match(unsent!.error.message, /before this request was sent/);
    assert.equal(r.failure?.code, 'ABORTED');
    assert.equal(s.seen.length, 2, 'the requests after the abort were not sent');
  } finally {
    await c.close();
    await s.close();
  }
});

test('send with a signal: an abort ends a retry wait at once; the request is not retried', async () => {
  const controller = new AbortController();
  const s = await scripted([{ status: 503, body: { error: 'busy' } }, { status: 200, body: { accepted: 1 } }]);
  // The retry would wait 9.9 s (backoff 10 s, random 0.99); the abort comes during the wait.
  const c = s.client({ backoff: { baseMs: 10_000, maxMs: 10_000 }, random: () => 0.99, onRetry: () => void setTimeout(() => controller.abort(), 50) });
  try {
    const r = await c.send([ev('a')], { signal: controller.signal });
    const x = r.results[0] as { status: string; attempts: number; error: { code: string; message: string } };
    assert.deepEqual([x.status, x.attempts, x.error.code], ['undeliverable', 1, 'ABORTED']);
    assert.match(x.error.message, /waited to be retried/);
    assert.equal(s.seen.length, 1, 'not retried');
  } finally {
    await c.close();
    await s.close();
  }
});
