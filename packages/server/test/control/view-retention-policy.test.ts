/**
 * The view retention of a data set's policy (issue 23): its default, what policies stored before it
 * get, and the rule that it is never shorter than the merge window or the maximum event age.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_POLICY, policyFromStored } from '../../src/control/data-set-policy.js';
import { validatePolicyRetention } from '../../src/control/data-set-policy.js';
import { ControlPlaneError } from '../../src/errors.js';

const DAY = 86_400_000;

test('the default view retention is 180 days, at least the default merge window and max age', () => {
  assert.equal(DEFAULT_POLICY.viewRetentionMs, 180 * DAY);
  assert.doesNotThrow(() => validatePolicyRetention(DEFAULT_POLICY));
});

test('a policy stored before the view retention gets 180 days, or its merge window or max age when longer', () => {
  assert.equal(policyFromStored(JSON.stringify({ consent: 'off', version: 3 })).viewRetentionMs, 180 * DAY);
  assert.equal(policyFromStored(JSON.stringify({ maxAgeSeconds: 365 * 86_400, version: 3 })).viewRetentionMs, 365 * DAY);
  assert.equal(policyFromStored(JSON.stringify({ mergeWindowSeconds: 200 * 86_400, version: 2 })).viewRetentionMs, 200 * DAY);
  assert.equal(policyFromStored(JSON.stringify({ mergeWindowMs: 400 * DAY, version: 4 })).viewRetentionMs, 400 * DAY);
  // Stored: kept as it is.
  assert.equal(policyFromStored(JSON.stringify({ viewRetentionMs: 30 * DAY, maxAgeSeconds: 86_400, mergeWindowMs: DAY, version: 5 })).viewRetentionMs, 30 * DAY);
  for (const stored of [{ maxAgeSeconds: 365 * 86_400 }, { mergeWindowSeconds: 200 * 86_400 }]) {
    assert.doesNotThrow(() => validatePolicyRetention(policyFromStored(JSON.stringify({ ...stored, version: 1 }))), 'older policies stay valid');
  }
});

test('a retention shorter than the merge window or the max age is refused, with what to do', () => {
  const base = { ...DEFAULT_POLICY, maxAgeSeconds: 86_400, mergeWindowMs: 2 * DAY };
  assert.doesNotThrow(() => validatePolicyRetention({ ...base, viewRetentionMs: 2 * DAY }));
  assert.throws(() => validatePolicyRetention({ ...base, viewRetentionMs: 2 * DAY - 1 }), (error: Error) => {
    assert.ok(error instanceof ControlPlaneError);
    assert.match(error.message, /invalid view retention 172799999ms: it must be at least the merge window \(2d\) and the maximum event age \(1d\).*raise --view-retention or lower --merge-window \/ --max-age/);
    return true;
  });
  assert.throws(() => validatePolicyRetention({ ...base, maxAgeSeconds: 3 * 86_400, viewRetentionMs: 2 * DAY }), /maximum event age \(3d\)/);
});
