/**
 * The admin port's failed-authentication throttle keeps bounded state whatever the attacker's
 * addresses (issue 16, point 3): IPv6 clients are keyed by /64, and once the table is full every
 * untracked client shares one overflow bucket, so spraying addresses neither grows memory nor
 * switches the throttle off. The black-box behaviour (429, Retry-After) is in admin-exposure.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AdminAuthThrottle, clientKeyOf, parseHostHeader } from '../../src/admin/admin-guard.js';

test('client keys: IPv4 and v4-mapped as is, IPv6 by /64', () => {
  assert.equal(clientKeyOf('203.0.113.7'), '203.0.113.7');
  assert.equal(clientKeyOf('::ffff:203.0.113.7'), '203.0.113.7');
  assert.equal(clientKeyOf('2001:db8:1:2::1'), '2001:db8:1:2::/64');
  assert.equal(clientKeyOf('2001:0db8:0001:0002:ffff:eeee:dddd:cccc'), '2001:db8:1:2::/64');
  assert.equal(clientKeyOf('::1'), '0:0:0:0::/64');
  assert.equal(clientKeyOf(undefined), 'unknown');
});

test('an IPv6 /64 is one client: rotating the interface id does not reset the throttle', () => {
  let now = 0;
  const throttle = new AdminAuthThrottle({ perSecond: 1 / 6, burst: 10 }, () => now);
  try {
    for (let i = 0; i < 10; i++) throttle.recordFailure(`2001:db8:1:2::${(i + 1).toString(16)}`);
    assert.ok(throttle.retryAfterSeconds('2001:db8:1:2:abcd::99') >= 1);
    assert.equal(throttle.retryAfterSeconds('2001:db8:1:3::1'), 0, 'another /64 is another client');
    now += 6_000;
    assert.equal(throttle.retryAfterSeconds('2001:db8:1:2::1'), 0, 'one failure refilled after 6 s');
  } finally {
    throttle.close();
  }
});

test('bounded: at most maxClients tracked; beyond them, sprayed addresses share one bucket and are throttled', () => {
  const now = 0;
  const throttle = new AdminAuthThrottle({ perSecond: 1 / 6, burst: 10 }, () => now, 100);
  try {
    // 100 addresses fill the table (one failure each: not yet throttled).
    for (let i = 0; i < 100; i++) throttle.recordFailure(`198.51.100.${i}`);
    assert.equal(throttle.trackedClients, 100);
    // 10,000 more addresses, one guess each: only the overflow bucket's burst gets through.
    let admitted = 0;
    for (let i = 0; i < 10_000; i++) {
      const address = `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
      if (throttle.retryAfterSeconds(address) > 0) continue;
      admitted++;
      throttle.recordFailure(address);
    }
    assert.equal(admitted, 10, 'the overflow bucket admits its burst, then nothing');
    assert.equal(throttle.trackedClients, 100, 'the table did not grow');
    // A tracked client keeps its own bucket.
    assert.equal(throttle.retryAfterSeconds('198.51.100.1'), 0);
  } finally {
    throttle.close();
  }
});

test('a client that presented the correct token stays verified for 10 minutes; at most 1,000 are kept', () => {
  let now = 0;
  const throttle = new AdminAuthThrottle({ perSecond: 1 / 6, burst: 10 }, () => now);
  try {
    assert.equal(throttle.recentlyVerified('203.0.113.7'), false);
    throttle.recordVerified('203.0.113.7');
    assert.equal(throttle.recentlyVerified('203.0.113.7'), true);
    assert.equal(throttle.recentlyVerified('::ffff:203.0.113.7'), true, 'v4-mapped is the same client');
    assert.equal(throttle.recentlyVerified('203.0.113.8'), false);
    now += 10 * 60_000 + 1;
    assert.equal(throttle.recentlyVerified('203.0.113.7'), false, 'expired');
    for (let i = 0; i < 1_001; i++) throttle.recordVerified(`10.0.${i >> 8}.${i & 255}`);
    assert.equal(throttle.recentlyVerified('10.0.0.0'), false, 'the oldest was evicted');
    assert.equal(throttle.recentlyVerified('10.0.3.232'), true);
  } finally {
    throttle.close();
  }
});

test('Host header parsing', () => {
  assert.deepEqual(parseHostHeader('Example.COM.:9464'), { name: 'example.com', port: '9464' });
  assert.deepEqual(parseHostHeader('[::1]:9464'), { name: '::1', port: '9464' });
  assert.deepEqual(parseHostHeader('[::1]'), { name: '::1', port: null });
  for (const bad of ['', '::1', '[::1', '[nope]:1', 'a b', 'host:', 'host:x', 'host:1:2', 'ex@mple.com']) {
    assert.equal(parseHostHeader(bad), null, bad);
  }
});
