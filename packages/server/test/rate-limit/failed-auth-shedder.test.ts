/**
 * The failed-authentication shedder's shared-address rules (issue 29, point 6), on a fake clock:
 * a (key id, address) pair that passed the HMAC is judged by its own bucket, so other clients'
 * failures on that address do not shed it; nothing else escapes the address's bucket; the verified
 * pairs expire and are bounded. Black-box: rate-limit/shared-address.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FailedAuthShedder } from '../../src/rate-limit/failed-auth-shedder.js';

const LIMITS = { perSecond: 1, burst: 5 };

test('a verified (key id, address) pair is not shed by other clients failing on its address', () => {
  let now = 1_000_000;
  const shedder = new FailedAuthShedder(LIMITS, () => now);
  try {
    shedder.recordVerified('198.51.100.1', 'key-good');
    for (let i = 0; i < 50; i++) shedder.recordFailure('198.51.100.1', i % 2 ? 'key-unknown' : undefined);
    assert.ok(shedder.shedSeconds('198.51.100.1') > 0, 'the address is shed');
    assert.ok(shedder.shedSeconds('198.51.100.1', 'key-other') > 0, 'so is any key not verified from there');
    assert.equal(shedder.shedSeconds('198.51.100.1', 'key-good'), 0, 'the verified pair is not');
    assert.ok(shedder.shedSeconds('198.51.100.2', 'key-good') === 0, 'another address is untouched');
    assert.equal(shedder.verifiedPairs, 1);
  } finally {
    shedder.close();
  }
});

test('a verified pair\'s failures spend its own bucket, not the address\'s, and it refills', () => {
  let now = 1_000_000;
  const shedder = new FailedAuthShedder(LIMITS, () => now);
  try {
    shedder.recordVerified('198.51.100.1', 'key-good');
    for (let i = 0; i < 5; i++) shedder.recordFailure('198.51.100.1', 'key-good');
    assert.equal(shedder.shedSeconds('198.51.100.1', 'key-good'), 1, 'the pair is shed after its burst');
    assert.equal(shedder.shedSeconds('198.51.100.1'), 0, 'the address is not');
    assert.equal(shedder.trackedAddresses, 0);
    now += 1_000;
    assert.equal(shedder.shedSeconds('198.51.100.1', 'key-good'), 0, 'one failure refilled after a second');
  } finally {
    shedder.close();
  }
});

test('verification expires after verifiedForMs: the pair is then judged by its address again', () => {
  let now = 1_000_000;
  const shedder = new FailedAuthShedder(LIMITS, () => now, 100_000, { verifiedForMs: 60_000 });
  try {
    shedder.recordVerified('198.51.100.1', 'key-good');
    for (let i = 0; i < 5; i++) shedder.recordFailure('198.51.100.1');
    now += 30_000;
    // The address refilled by now (30 s at 1/s); spend it again.
    for (let i = 0; i < 10; i++) shedder.recordFailure('198.51.100.1');
    assert.equal(shedder.shedSeconds('198.51.100.1', 'key-good'), 0);
    now += 30_001;
    for (let i = 0; i < 10; i++) shedder.recordFailure('198.51.100.1');
    assert.ok(shedder.shedSeconds('198.51.100.1', 'key-good') > 0, 'no longer verified: shed with its address');
  } finally {
    shedder.close();
  }
});

test('verified pairs are bounded: the oldest is forgotten first, a refreshed one is kept', () => {
  let now = 1_000_000;
  const shedder = new FailedAuthShedder(LIMITS, () => now, 100_000, { maxVerifiedPairs: 3 });
  try {
    shedder.recordVerified('10.0.0.1', 'k');
    now += 61_000;
    shedder.recordVerified('10.0.0.2', 'k');
    shedder.recordVerified('10.0.0.3', 'k');
    now += 61_000;
    shedder.recordVerified('10.0.0.1', 'k'); // refreshed: now the youngest
    shedder.recordVerified('10.0.0.4', 'k'); // evicts 10.0.0.2
    assert.equal(shedder.verifiedPairs, 3);
    for (const address of ['10.0.0.1', '10.0.0.2', '10.0.0.4']) for (let i = 0; i < 10; i++) shedder.recordFailure(address);
    assert.equal(shedder.shedSeconds('10.0.0.1', 'k'), 0, 'still verified');
    assert.ok(shedder.shedSeconds('10.0.0.2', 'k') > 0, 'forgotten, so shed with its address');
    assert.equal(shedder.shedSeconds('10.0.0.4', 'k'), 0);
  } finally {
    shedder.close();
  }
});
