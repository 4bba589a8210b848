import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BodyBudget, type BodyReservation } from '../../src/http/body-budget.js';

function reserveAll(budget: BodyBudget, sizes: number[]) {
  const granted: (BodyReservation | null)[] = sizes.map(() => null);
  const withdraws = sizes.map((bytes, i) => budget.reserve(bytes, (r) => (granted[i] = r)));
  return { granted, withdraws };
}

test('requests are admitted while their bytes fit, and the rest wait in arrival order', () => {
  const budget = new BodyBudget(100);
  const { granted } = reserveAll(budget, [40, 40, 40, 10]);
  assert.deepEqual(granted.map(Boolean), [true, true, false, false], 'the 10-byte request does not overtake the waiting 40');
  assert.equal(budget.inFlight, 80);
  assert.equal(budget.waiting, 2);
  granted[0]!.release();
  assert.deepEqual(granted.map(Boolean), [true, true, true, true]);
  assert.equal(budget.inFlight, 90);
  assert.equal(budget.waiting, 0);
});

test('a body larger than the whole budget is admitted alone once nothing else is in flight', () => {
  const budget = new BodyBudget(100);
  const { granted } = reserveAll(budget, [10, 500]);
  assert.deepEqual(granted.map(Boolean), [true, false]);
  granted[0]!.release();
  assert.ok(granted[1], 'admitted when the budget is empty');
  assert.equal(budget.inFlight, 500);
});

test('release is counted once, growth is counted, and a withdrawn waiter is never admitted', () => {
  const budget = new BodyBudget(100);
  const { granted, withdraws } = reserveAll(budget, [60, 50, 30]);
  assert.deepEqual(granted.map(Boolean), [true, false, false]);
  withdraws[1]!(); // the client of the second request went away while it waited
  assert.deepEqual(granted.map(Boolean), [true, false, true], 'the next waiter moves up when one withdraws');
  granted[0]!.grow(20);
  assert.equal(budget.inFlight, 110);
  granted[0]!.release();
  granted[0]!.release();
  assert.equal(budget.inFlight, 30);
  assert.equal(granted[1], null);
});

test('untrusted requests together hold at most their share; trusted ones are admitted past them', () => {
  const budget = new BodyBudget(100, 0.25);
  const untrusted = [20, 10, 10].map((bytes) => {
    let granted: BodyReservation | null = null;
    budget.reserve(bytes, (r) => (granted = r), false);
    return () => granted;
  });
  assert.deepEqual(untrusted.map((g) => Boolean(g())), [true, false, false], 'the share is 25 bytes: the second waits');
  assert.equal(budget.untrustedInFlight, 20);
  let trusted: BodyReservation | null = null;
  budget.reserve(70, (r) => (trusted = r), true);
  assert.ok(trusted, 'a trusted request is not queued behind waiting untrusted ones');
  assert.equal(budget.inFlight, 90);
  untrusted[0]!()!.release();
  assert.deepEqual(untrusted.map((g) => Boolean(g())), [true, true, true], 'both 10-byte requests fit the share and the budget');
  assert.equal(budget.untrustedInFlight, 20);
  assert.equal(budget.inFlight, 90);
});

test('an untrusted body larger than the share is admitted alone, and waits behind trusted waiters', () => {
  const budget = new BodyBudget(100, 0.25);
  const held: { big?: BodyReservation } = {};
  budget.reserve(60, (r) => (held.big = r), false);
  assert.ok(held.big, 'alone in its class and within the budget');
  let trustedWaiting: BodyReservation | null = null;
  let untrustedWaiting: BodyReservation | null = null;
  let trustedFirst: BodyReservation | null = null;
  budget.reserve(30, (r) => (trustedFirst = r), true);
  budget.reserve(50, (r) => (trustedWaiting = r), true);
  budget.reserve(5, (r) => (untrustedWaiting = r), false);
  assert.ok(trustedFirst);
  assert.equal(trustedWaiting, null);
  assert.equal(untrustedWaiting, null, 'untrusted requests wait while a trusted one does');
  held.big!.release();
  assert.ok(trustedWaiting);
  assert.ok(untrustedWaiting, 'then the untrusted one, within the share and the budget');
  assert.equal(budget.inFlight, 85);
});

test('admitNow counts bytes already in memory without waiting, even past the budget', () => {
  const budget = new BodyBudget(100, 0.25);
  const { granted } = reserveAll(budget, [90, 50]);
  assert.deepEqual(granted.map(Boolean), [true, false]);
  const whole = budget.admitNow(30, false);
  assert.equal(budget.inFlight, 120);
  assert.equal(budget.untrustedInFlight, 30);
  whole.release();
  granted[0]!.release();
  assert.ok(granted[1], 'the waiter is admitted as room frees up');
  assert.equal(budget.inFlight, 50);
  assert.equal(budget.untrustedInFlight, 0);
});
