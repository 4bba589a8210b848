/**
 * Crash loop, CI length: 20 SIGKILLs of the server (`--workers 1`: one process, its queue writer thread) at
 * random moments under load from six concurrent senders. The long version: test-faults/.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runCrashLoop } from './crash-loop.js';

test('20 SIGKILLs under load: no acknowledged event lost, merged view exactly once', { timeout: 300_000 }, async (t) => {
  const figures = await runCrashLoop({
    kills: 20,
    senders: 6,
    minUpMs: 100,
    maxUpMs: 700,
    workers: 1,
    consumerDuringLoop: false,
    log: (line) => t.diagnostic(line),
  });
  assert.equal(figures.kills, 20);
  assert.equal(figures.lost, 0);
  assert.ok(figures.requestsAcknowledged > 0);
});
