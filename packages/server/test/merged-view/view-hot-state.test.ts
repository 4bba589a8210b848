/**
 * ViewHotState's bound on the count that decides whether a data set is held
 * (src/merged-view/view-hot-state.ts `countBound`): a count that stops at the bound decides as the
 * exact count does, so the stores count at most that many links of a data set far past the bound.
 * The stores' answers against the file with bounds of every size are the model test's
 * (test/consumer/batch-applier-model.test.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ViewHotState } from '../../src/merged-view/view-hot-state.js';

const linksOf = (prefix: string, n: number): [string, string][] => Array.from({ length: n }, (_, i) => [`${prefix}:${i}`, `ik_${i % 7}`]);

test('the count is asked for at most the links the state can still take, plus one', () => {
  const state = new ViewHotState(10);
  const asked: number[] = [];
  const a = linksOf('a', 4);
  assert.equal(state.countBound, 11);
  const held = state.linksOf('ds-a', (atMost) => (asked.push(atMost), Math.min(a.length, atMost)), () => a);
  assert.equal(held?.size, 4);
  assert.equal(held?.get('a:3'), 'ik_3');
  // Four links held: six more fit, so a count may stop at seven.
  assert.equal(state.countBound, 7);
  const b = linksOf('b', 6);
  assert.equal(state.linksOf('ds-b', (atMost) => (asked.push(atMost), Math.min(b.length, atMost)), () => b)?.size, 6, 'exactly what is left fits');
  assert.equal(state.countBound, 1);
  assert.deepEqual(asked, [11, 7]);
});

test('a count stopped at the bound is "not held", as the whole count is, and nothing is scanned', () => {
  for (const links of [7, 8, 1_000_000]) {
    const state = new ViewHotState(10);
    const a = linksOf('a', 4);
    state.linksOf('ds-a', (atMost) => Math.min(a.length, atMost), () => a);
    let scanned = false;
    const big = state.linksOf('ds-big', (atMost) => Math.min(links, atMost), () => {
      scanned = true;
      return linksOf('big', links);
    });
    assert.equal(big, undefined, `${links} links past a bound of 6 left`);
    assert.equal(scanned, false);
    assert.equal(state.heldLinks('ds-big'), undefined, 'known not to be held until the next clear');
    assert.equal(state.size, 4, 'what was held stays');
  }
});

test('after a clear the whole bound is free again, and a data set is counted anew', () => {
  const state = new ViewHotState(5);
  const a = linksOf('a', 5);
  state.linksOf('ds-a', (atMost) => Math.min(a.length, atMost), () => a);
  assert.equal(state.countBound, 1);
  assert.equal(state.linksOf('ds-b', (atMost) => Math.min(1, atMost), () => linksOf('b', 1)), undefined, 'no room left');
  state.clear();
  assert.equal(state.countBound, 6);
  assert.equal(state.linksOf('ds-b', (atMost) => Math.min(1, atMost), () => linksOf('b', 1))?.size, 1);
});
