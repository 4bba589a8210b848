/**
 * The consumer loop tells its tick how many lanes are failing (consumer/consumer-loop.ts): the
 * embedded consumer writes its heartbeat only when none is, so `worker status` reports a live
 * consumer whose batches fail (a full disk) as stalled rather than healthy.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runConsumerLoop, type LaneHealth, type PartitionStepper } from '../../src/consumer/consumer-loop.js';
import type { StepResult } from '../../src/consumer/view-consumer.js';
import { createLogger } from '../../src/observability/logger.js';
import { waitFor } from '../helpers/fault-tools.js';

const idle: StepResult = { records: 0, created: 0, merged: 0, discarded: 0, nextSeq: 1, moved: false };

test('the tick is told of a lane whose batches fail, and no longer once it applies again', async () => {
  let failNext = true;
  const steps = { healthy: 0, flaky: 0 };
  const healthy: PartitionStepper = { name: 'p00', step: async () => (steps.healthy++, idle) };
  const flaky: PartitionStepper = {
    name: 'p01',
    step: async () => {
      steps.flaky++;
      if (failNext) throw Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
      return idle;
    },
  };
  const ticks: LaneHealth[] = [];
  let stop!: () => void;
  const stopped = new Promise<void>((resolve) => (stop = resolve));
  const loop = runConsumerLoop(
    { refresh: async () => [healthy, flaky] },
    { logger: createLogger({ level: 'silent' }), stopped, pollMs: 5, tickMs: 10, onTick: (health) => void ticks.push(health) },
  );
  try {
    await waitFor('a tick after the failing lane failed', () => steps.flaky > 0 && ticks.at(-1)?.failingLanes === 1);
    assert.ok(steps.healthy > 1, 'the other lane kept stepping');
    failNext = false;
    const failedBefore = steps.flaky;
    await waitFor('the lane to apply again', () => steps.flaky > failedBefore + 1);
    const seen = ticks.length;
    await waitFor('a tick after it applied', () => ticks.length > seen);
    assert.equal(ticks.at(-1)!.failingLanes, 0);
  } finally {
    stop();
    await loop;
  }
});

test('every lane applying or idle: the tick sees no failing lane', async () => {
  const ticks: LaneHealth[] = [];
  let stop!: () => void;
  const stopped = new Promise<void>((resolve) => (stop = resolve));
  const lanes: PartitionStepper[] = [0, 1, 2].map((k) => ({ name: `p0${k}`, step: async () => idle }));
  const loop = runConsumerLoop({ refresh: async () => lanes }, { logger: createLogger({ level: 'silent' }), stopped, pollMs: 5, tickMs: 10, onTick: (health) => void ticks.push(health) });
  await waitFor('three ticks', () => ticks.length >= 3);
  stop();
  await loop;
  assert.deepEqual([...new Set(ticks.map((t) => t.failingLanes))], [0]);
});
