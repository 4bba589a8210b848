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
