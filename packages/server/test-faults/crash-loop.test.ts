/**
 * Crash loop, full length (`npm run test:faults`): 60 SIGKILLs of the whole node (primary, serving
 * workers and the merged-view consumer) under load from eight senders, with longer intervals so
 * kills land in every phase: startup, TLS handshakes, group commits, checkpoints, consumer batches.
 * Set ECAPI_CRASH_KILLS to change the number of kills, ECAPI_CRASH_SEED to replay a run.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runCrashLoop } from '../test/reliability/crash-loop.js';

const kills = Number(process.env.ECAPI_CRASH_KILLS ?? 60);

test(`${kills} SIGKILLs under load: no acknowledged event lost, merged view exactly once`, { timeout: 1_800_000 }, async (t) => {
  const figures = await runCrashLoop({
    kills,
    senders: 8,
    minUpMs: 100,
    maxUpMs: 3000,
    workers: 2,
    consumerDuringLoop: true,
    ...(process.env.ECAPI_CRASH_SEED ? { seed: Number(process.env.ECAPI_CRASH_SEED) } : {}),
    log: (line) => {
      t.diagnostic(line);
      console.log(line);
    },
  });
  assert.equal(figures.kills, kills);
  assert.equal(figures.lost, 0);
});
