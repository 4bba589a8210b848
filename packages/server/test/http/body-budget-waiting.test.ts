/**
 * The body budget's queue of waiting requests (http/body-budget.ts), as pure logic: the caps on
 * waiting untrusted requests (in all and per connection), and admission of many waiters whose
 * requests died meanwhile (audit of 2026-11-27, findings 1 and 2).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BodyBudget, DEFAULT_MAX_UNTRUSTED_WAITING, DEFAULT_MAX_UNTRUSTED_WAITING_PER_CONNECTION, type BodyReservation } from '../../src/http/body-budget.js';

test('untrusted requests beyond the waiting caps are refused at once, in all and per connection; trusted ones never', () => {
  const budget = new BodyBudget(100, 0.25, { maxUntrustedWaiting: 5, maxUntrustedWaitingPerConnection: 2 });
  const holder: { r?: BodyReservation } = {};
  assert.notEqual(budget.reserve(25, (r) => (holder.r = r), false, {}), null);
  assert.ok(holder.r, 'the share is free: admitted');
  const a = {}, b = {}, c = {};
  const admitted: string[] = [];
  const ask = (name: string, connection: object) => budget.reserve(10, () => admitted.push(name), false, connection);
  assert.notEqual(ask('a1', a), null);
  assert.notEqual(ask('a2', a), null);
  assert.equal(ask('a3', a), null, 'a third waiter on one connection is refused');
  assert.notEqual(ask('b1', b), null);
  assert.notEqual(ask('b2', b), null);
  assert.notEqual(ask('c1', c), null);
  assert.equal(ask('c2', c), null, 'the sixth waiter in all is refused, whatever its connection');
  assert.equal(budget.untrustedWaiting, 5);
  assert.equal(budget.refused, 2);
  assert.notEqual(budget.reserve(500, () => {}, true), null, 'a trusted request may always wait');
  assert.equal(budget.waiting, 6);
  assert.equal(budget.refused, 2, 'trusted requests are not counted as refused');
  assert.deepEqual(admitted, []);
});

test('a withdrawn waiter frees its places, and refused requests are never admitted', () => {
  const budget = new BodyBudget(100, 0.25, { maxUntrustedWaiting: 2, maxUntrustedWaitingPerConnection: 1 });
  const holder: { r?: BodyReservation } = {};
  budget.reserve(25, (r) => (holder.r = r), false);
  const conn = {};
  const admitted: string[] = [];
  const first = budget.reserve(10, () => admitted.push('first'), false, conn);
  assert.ok(first);
  assert.equal(budget.reserve(10, () => admitted.push('refused'), false, conn), null);
  first();
  first(); // a second withdraw does nothing
  assert.equal(budget.untrustedWaiting, 0);
  const again = budget.reserve(10, () => admitted.push('again'), false, conn);
  assert.ok(again, 'the connection has a place again');
  holder.r!.release();
  assert.deepEqual(admitted, ['again'], 'the refused request was never admitted');
});

test('the default caps: 8 waiting untrusted requests per connection, 128 in all', () => {
  assert.equal(DEFAULT_MAX_UNTRUSTED_WAITING, 128);
  assert.equal(DEFAULT_MAX_UNTRUSTED_WAITING_PER_CONNECTION, 8);
  const budget = new BodyBudget(100);
  budget.reserve(25, () => {}, false);
  const connections = Array.from({ length: 20 }, () => ({}));
  let refused = 0;
  for (const connection of connections) for (let i = 0; i < 12; i++) if (budget.reserve(10, () => {}, false, connection) === null) refused++;
  assert.equal(budget.untrustedWaiting, 128);
  assert.equal(refused, 240 - 128);
});

test('a hundred thousand waiters whose requests died are admitted and released in one loop, not recursively', () => {
  // Each admitted waiter releases at once (its stream was closed meanwhile: body-reader.ts), which
  // used to start a nested admission per waiter: a mass expiry overflowed the stack or stalled.
  const budget = new BodyBudget(1000);
  const holder: { r?: BodyReservation } = {};
  budget.reserve(1000, (r) => (holder.r = r));
  const n = 100_000;
  let admittedAndReleased = 0;
  for (let i = 0; i < n; i++) {
    budget.reserve(600, (r) => {
      admittedAndReleased++;
      r.release();
    });
  }
  assert.equal(budget.waiting, n);
  holder.r!.release();
  assert.equal(admittedAndReleased, n);
  assert.equal(budget.waiting, 0);
  assert.equal(budget.inFlight, 0);
});

test('withdrawing waiters from the middle or the end of a long queue keeps the order of the rest', () => {
  const budget = new BodyBudget(100);
  const holder: { r?: BodyReservation } = {};
  budget.reserve(100, (r) => (holder.r = r));
  const admitted: number[] = [];
  const withdraws = Array.from({ length: 10 }, (_, i) => budget.reserve(10, () => void admitted.push(i), true)!);
  for (const i of [9, 4, 0, 5]) withdraws[i]!();
  assert.equal(budget.waiting, 6);
  holder.r!.release();
  assert.deepEqual(admitted, [1, 2, 3, 6, 7, 8]);
});
