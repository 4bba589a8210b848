/**
 * The SDK against a real local HTTPS server (TLS 1.3, the service's own self-signed certificate)
 * that answers 429 and 503 with huge Retry-After values (issue 29, point 7a): the wait is capped
 * (maxRetryAfterMs), never overflows Node's timer (Retry-After: 3000000 used to fire after 1 ms), and
 * no retry comes sooner than the backoff (Retry-After: 0). The server's arrival times are compared
 * with the waits the client announced: a timer never fires early, so `gap >= delay` is exact.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { Client, type ClientOptions, type RetryInfo } from '@ecapi-ingest/client';
import { loadTlsMaterial } from '../../src/tls/tls-material.js';
import { tempDataDir } from '../helpers/server-process.js';

type Reply = { status: number; retryAfter?: string };

async function scriptedHttps(replies: Reply[]) {
  const tls = await loadTlsMaterial({ dataDir: tempDataDir('ecapi-retry-after-') });
  const arrivals: number[] = [];
  const server = https.createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    req.resume();
    req.on('end', () => {
      arrivals.push(performance.now());
      const reply = replies[Math.min(arrivals.length - 1, replies.length - 1)]!;
      const body = reply.status === 200 ? '{"accepted":1}' : '{"error":"slow down"}';
      res.writeHead(reply.status, { 'content-type': 'application/json', ...(reply.retryAfter !== undefined ? { 'retry-after': reply.retryAfter } : {}) });
      res.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const retries: RetryInfo[] = [];
  const client = (o: Partial<ClientOptions> = {}) =>
    new Client({
      baseUrl: `https://localhost:${(server.address() as AddressInfo).port}`,
      keyId: 'key_1', secret: 'sk_1', dataSetId: 'ds', ca: tls.cert,
      backoff: { baseMs: 10, maxMs: 40 },
      onRetry: (r) => retries.push(r),
      ...o,
    });
  return {
    arrivals, retries, client,
    close: () => { server.closeAllConnections(); return new Promise<void>((r) => server.close(() => r())); },
  };
}

const ev = { id: 'a', timestamp: 1746558464, event_type: 'page_view' as const };

for (const status of [429, 503]) {
  test(`${status} with Retry-After: 3000000 waits the cap (maxRetryAfterMs), not 1 ms and not 35 days`, { timeout: 30_000 }, async () => {
    const s = await scriptedHttps([{ status, retryAfter: '3000000' }, { status, retryAfter: '86400' }, { status: 200 }]);
    const c = s.client({ maxRetryAfterMs: 400 });
    try {
      const r = await c.send([ev]);
      assert.equal(r.accepted, 1, JSON.stringify(r.results));
      assert.equal(s.arrivals.length, 3, 'two retries, no more');
      assert.deepEqual(s.retries.map((x) => x.retryAfterMs), [3_000_000_000, 86_400_000], 'Retry-After as the service sent it');
      for (const [i, x] of s.retries.entries()) {
        assert.ok(x.delayMs <= 400 && x.delayMs >= 360, `retry ${i + 1}: waits the cap less its jitter, got ${x.delayMs} ms`);
        const gap = s.arrivals[i + 1]! - s.arrivals[i]!;
        assert.ok(gap >= x.delayMs - 2, `retry ${i + 1} came ${gap.toFixed(1)} ms after the ${status}, before the announced ${x.delayMs} ms`);
      }
    } finally {
      await c.close();
      await s.close();
    }
  });
}

test('Retry-After: 0 is no licence to retry faster than the backoff', { timeout: 30_000 }, async () => {
  const s = await scriptedHttps([{ status: 429, retryAfter: '0' }, { status: 503, retryAfter: '0' }, { status: 200 }]);
  // random 0.999: the backoff waits almost its whole ceiling (300 ms, then 600 ms capped at 300).
  const c = s.client({ backoff: { baseMs: 300, maxMs: 300 }, random: () => 0.999 });
  try {
    const r = await c.send([ev]);
    assert.equal(r.accepted, 1);
    for (const [i, x] of s.retries.entries()) {
      assert.equal(x.retryAfterMs, 0);
      assert.ok(x.delayMs >= 299, `retry ${i + 1} waits the backoff, not ${x.delayMs} ms`);
      assert.ok(s.arrivals[i + 1]! - s.arrivals[i]! >= x.delayMs - 2);
    }
  } finally {
    await c.close();
    await s.close();
  }
});

test('the default cap is 60 s; maxRetryAfterMs out of range is refused', () => {
  const base = { baseUrl: 'https://localhost:1', keyId: 'k', secret: 's', dataSetId: 'd' };
  for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 31]) {
    assert.throws(() => new Client({ ...base, maxRetryAfterMs: bad }), /maxRetryAfterMs must be a number of ms from 0 to 2147483647/, String(bad));
  }
  void new Client({ ...base, maxRetryAfterMs: 0 }).close();
});
