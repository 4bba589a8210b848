/**
 * Durations of a data set's policy are kept exactly (issue 15, item 6): `--merge-window 500ms` is a
 * 500 ms window (it used to be stored as 0 s, which turned merging off) and `1500ms` stays 1500 ms
 * (it used to become 1 s), in both control planes (the CLI runs against the PostgreSQL one under
 * ECAPI_TEST_PROFILE=postgres), on the console API and for the consumer. What cannot be kept
 * exactly is refused with a clear error.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { formatDurationMs, parseDurationMs } from '../../src/control/duration.js';
import { policyFromStored } from '../../src/control/data-set-policy.js';
import { cli, cliJson, startServer, tempDataDir } from '../helpers/server-process.js';

test('durations parse exactly, in whole milliseconds', () => {
  assert.equal(parseDurationMs('500ms'), 500);
  assert.equal(parseDurationMs('1500ms'), 1500);
  assert.equal(parseDurationMs('1.5s'), 1500);
  assert.equal(parseDurationMs('0.3s'), 300); // 0.3 * 1000 is 300.00000000000006 in floating point
  assert.equal(parseDurationMs('2.3h'), 8_280_000);
  assert.equal(parseDurationMs('1.50000000000s'), 1500);
  assert.equal(parseDurationMs('7d'), 604_800_000);
  assert.throws(() => parseDurationMs('0.5ms'), /whole milliseconds/);
  assert.throws(() => parseDurationMs('1.0005s'), /whole milliseconds/);
  assert.throws(() => parseDurationMs('5'), /invalid duration/);
  assert.equal(formatDurationMs(1500), '1500ms');
  assert.equal(formatDurationMs(500), '500ms');
  assert.equal(formatDurationMs(90 * 60_000), '90m');
});

test('a policy stored with whole mergeWindowSeconds (before milliseconds) reads as the same window', () => {
  assert.equal(policyFromStored(JSON.stringify({ consent: 'off', mergeWindowSeconds: 3600, version: 4 })).mergeWindowMs, 3_600_000);
  assert.equal(policyFromStored(JSON.stringify({ mergeWindowMs: 500, version: 2 })).mergeWindowMs, 500);
  assert.equal(policyFromStored(JSON.stringify({ version: 1 })).mergeWindowMs, 7 * 86_400_000);
  assert.equal('mergeWindowSeconds' in policyFromStored(JSON.stringify({ mergeWindowSeconds: 60, version: 1 })), false);
});

test('data-set policy --merge-window 500ms and 1500ms: stored, shown and served exactly', { timeout: 60_000 }, async () => {
  const dataDir = tempDataDir('ecapi-merge-window-');
  await cliJson(dataDir, ['data-set', 'create', 'shop']);
  const half = await cliJson(dataDir, ['data-set', 'policy', 'shop', '--merge-window', '500ms']);
  assert.equal(half.policy.merge_window, '500ms');
  let listed = await cliJson<{ id: string; policy: { merge_window: string } }[]>(dataDir, ['data-set', 'list']);
  assert.equal(listed.find((d) => d.id === 'shop')!.policy.merge_window, '500ms');

  const oneAndHalf = await cliJson(dataDir, ['data-set', 'policy', 'shop', '--merge-window', '1500ms']);
  assert.equal(oneAndHalf.policy.merge_window, '1500ms');
  listed = await cliJson(dataDir, ['data-set', 'list']);
  assert.equal(listed.find((d) => d.id === 'shop')!.policy.merge_window, '1500ms');
  const text = await cli(dataDir, ['data-set', 'list']);
  assert.match(text.stdout, /merge_window=1500ms/);

  // What cannot be kept exactly is refused, and the policy stays as it was.
  const refused = await cli(dataDir, ['data-set', 'policy', 'shop', '--merge-window', '0.5ms']);
  assert.notEqual(refused.code, 0);
  assert.match(refused.stderr, /whole milliseconds/);
  const maxAge = await cli(dataDir, ['data-set', 'policy', 'shop', '--max-age', '500ms']);
  assert.notEqual(maxAge.code, 0);
  assert.match(maxAge.stderr, /--max-age.*whole seconds/);
  listed = await cliJson(dataDir, ['data-set', 'list']);
  assert.equal(listed.find((d) => d.id === 'shop')!.policy.merge_window, '1500ms');

  // The console API serves it exactly.
  const server = await startServer({ dataDir, args: ['--workers', '1', '--no-worker'] });
  try {
    const res = await fetch(`http://127.0.0.1:${server.adminPort}/api/data-sets/shop`);
    assert.equal(res.status, 200);
    const body = (await res.json()) as { policy: { merge_window_ms: number; merge_window_seconds: number } };
    assert.equal(body.policy.merge_window_ms, 1500);
    assert.equal(body.policy.merge_window_seconds, 1.5);
  } finally {
    await server.stop();
  }
});
