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
