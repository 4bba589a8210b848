/**
 * The key failed-authentication shedding counts a client by (rate-limit/client-key.ts), shared by
 * the public port and the admin port: IPv4 as is, IPv4-mapped IPv6 as its IPv4, IPv6 by its /64.
 * Black-box (the public port, over the PROXY protocol): rate-limit/ipv6-prefix.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { clientKeyOf } from '../../src/rate-limit/client-key.js';
import { clientKeyOf as adminClientKeyOf } from '../../src/admin/admin-guard.js';

test('IPv4 and IPv4-mapped IPv6 are keyed by the address', () => {
  assert.equal(clientKeyOf('203.0.113.7'), '203.0.113.7');
  assert.equal(clientKeyOf('::ffff:203.0.113.7'), '203.0.113.7');
  assert.equal(clientKeyOf('::FFFF:203.0.113.7'), '203.0.113.7');
  assert.notEqual(clientKeyOf('203.0.113.7'), clientKeyOf('203.0.113.8'));
});

test('IPv6 addresses of one /64 share a key, whatever their spelling', () => {
  const key = clientKeyOf('2001:db8:1:2::1');
  assert.equal(key, '2001:db8:1:2::/64');
  for (const other of ['2001:db8:1:2::ffff', '2001:0db8:0001:0002:ffff:eeee:dddd:cccc', '2001:DB8:1:2:0:0:0:9', '2001:db8:1:2::a%eth0']) {
    assert.equal(clientKeyOf(other), key, other);
  }
});

test('other /64s get keys of their own', () => {
  assert.equal(clientKeyOf('2001:db8:1:3::1'), '2001:db8:1:3::/64');
  assert.equal(clientKeyOf('2001:db8::1'), '2001:db8:0:0::/64');
  assert.equal(clientKeyOf('::1'), '0:0:0:0::/64');
  assert.notEqual(clientKeyOf('2001:db8:1:2::1'), clientKeyOf('2001:db8:1:3::1'));
});

test('no address, or not an IP, is passed through (never throws)', () => {
  assert.equal(clientKeyOf(undefined), 'unknown');
  assert.equal(clientKeyOf(''), 'unknown');
  assert.equal(clientKeyOf('not:an:ip'), 'not:an:ip');
  // Idempotent: a key is its own key.
  assert.equal(clientKeyOf(clientKeyOf('2001:db8:1:2::1')), '2001:db8:1:2::/64');
});

test('the admin port keys clients with the same function', () => {
  assert.equal(adminClientKeyOf, clientKeyOf);
});
