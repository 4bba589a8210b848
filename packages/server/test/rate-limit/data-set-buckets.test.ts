/** The admission arithmetic, on an injected clock: exact, so it can be asserted to the request. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DataSetBuckets } from '../../src/rate-limit/data-set-buckets.js';
import { DEFAULT_LIMITS, type DataSetLimits } from '../../src/rate-limit/data-set-limits.js';
import { rateLimitHeaders, retryAfterSeconds } from '../../src/rate-limit/rate-limiter.js';

/** Offers `offered` requests evenly over each second for `seconds` seconds; returns admitted per second. */
function run(buckets: DataSetBuckets, startMs: number, seconds: number, offered: number): number[] {
  const admitted: number[] = [];
  for (let s = 0; s < seconds; s++) {
    let n = 0;
    for (let i = 0; i < offered; i++) {
      const t = startMs + s * 1000 + Math.floor((i * 1000) / offered);
      if (buckets.take(1, 0, t).ok) n++;
    }
    admitted.push(n);
  }
  return admitted;
}

test('defaults: an idle data set runs at 5,000 req/s for 60 s, then is held to 1,000 req/s', () => {
  const start = 1_000_000_000_000;
  const buckets = new DataSetBuckets(DEFAULT_LIMITS, start);
  const admitted = run(buckets, start, 70, 8000);
  for (let s = 0; s < 59; s++) assert.equal(admitted[s], 5000, `second ${s}`);
  for (let s = 61; s < 70; s++) assert.ok(Math.abs(admitted[s]! - 1000) <= 1, `second ${s}: ${admitted[s]}`);
  assert.ok(Math.max(...admitted) <= 5000, 'no second ever admits more than 5,000');
});

test('a refused take consumes nothing, and Retry-After is the real wait', () => {
  const limits: DataSetLimits = { rps: 5, burstRps: 10, burstSeconds: 2, eps: 1000 };
  const t0 = 5_000_000;
  const buckets = new DataSetBuckets(limits, t0);
  // Capacity (10 - 5) * 2 = 10 sustained tokens; the peak allows 10 in this second.
  for (let i = 0; i < 10; i++) assert.equal(buckets.take(1, 0, t0).ok, true);
  const burst = buckets.take(1, 0, t0 + 100);
  assert.deepEqual(burst, { ok: false, limit: 'burst', retryAfterMs: 900 });
  // Next second: the peak is fresh, but the sustained bucket holds 1.1 s * 5/s = 5.5 tokens.
  for (let i = 0; i < 5; i++) assert.equal(buckets.take(1, 0, t0 + 1100).ok, true, `take ${i}`);
  const sustained = buckets.take(1, 0, t0 + 1100);
  assert.equal(sustained.ok, false);
  assert.equal(sustained.limit, 'requests');
  assert.ok(Math.abs(sustained.retryAfterMs! - 100) < 1e-6, String(sustained.retryAfterMs));
  assert.equal(buckets.take(1, 0, t0 + 1200).ok, true, 'admitted exactly when Retry-After said');
  assert.equal(retryAfterSeconds(100), 1);
  assert.equal(retryAfterSeconds(1001), 2);
});

test('events are limited across batches, and one batch of up to 1,000 always fits', () => {
  const limits: DataSetLimits = { rps: 1000, burstRps: 5000, burstSeconds: 60, eps: 2500 };
  const t0 = 7_000_000;
  const buckets = new DataSetBuckets(limits, t0);
  assert.equal(buckets.take(0, 1000, t0).ok, true);
  assert.equal(buckets.take(0, 1000, t0).ok, true);
  const refused = buckets.take(0, 1000, t0);
  assert.equal(refused.limit, 'events');
  assert.equal(refused.retryAfterMs, 200); // 500 short at 2,500/s
  const tiny = new DataSetBuckets({ ...limits, eps: 10 }, t0);
  assert.equal(tiny.take(0, 1000, t0).ok, true, 'capacity is at least one full batch');
});

test('giveBack returns leased tokens; requests leased in an earlier second leave this second alone', () => {
  const limits: DataSetLimits = { rps: 10, burstRps: 20, burstSeconds: 1, eps: 1000 };
  const t0 = 9_000_000;
  const buckets = new DataSetBuckets(limits, t0);
  assert.equal(buckets.take(10, 0, t0).ok, true);
  buckets.giveBack(10, 0, Math.floor(t0 / 1000), t0);
  assert.equal(buckets.view(t0).burstRemaining, 20);
  assert.equal(buckets.view(t0).sustainedRemaining, 10);
});

test('RateLimit-Policy and RateLimit headers describe the three quotas', () => {
  const buckets = new DataSetBuckets(DEFAULT_LIMITS, 2_000_500);
  buckets.take(1, 100, 2_000_500);
  const headers = rateLimitHeaders(buckets.view(2_000_500));
  assert.equal(headers['ratelimit-policy'], '"burst";q=5000;w=1, "sustained";q=240000;w=240, "events";q=100000;w=1');
  assert.equal(headers.ratelimit, '"burst";r=4999;t=1, "sustained";r=239999;t=1, "events";r=99900;t=1');
});

test('rps == burst-rps: concurrent requests in the same millisecond are admitted up to the limit', () => {
  // Regression: the sustained bucket was a single token when burst-rps equalled rps, so every
  // request after the first within one millisecond was refused.
  const limits: DataSetLimits = { rps: 100_000, burstRps: 100_000, burstSeconds: 60, eps: 10_000_000 };
  const t0 = 11_000_000;
  const buckets = new DataSetBuckets(limits, t0);
  let admitted = 0;
  for (let i = 0; i < 500; i++) if (buckets.take(1, 0, t0).ok) admitted++;
  assert.equal(admitted, 500);
  // And the per-second cap still holds: one second never admits more than burst-rps.
  const second = new DataSetBuckets({ rps: 10, burstRps: 10, burstSeconds: 1, eps: 1000 }, t0);
  let inSecond = 0;
  for (let i = 0; i < 50; i++) if (second.take(1, 0, t0 + i * 10).ok) inSecond++;
  assert.equal(inSecond, 10);
});
