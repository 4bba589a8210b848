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

/**
 * The loop over `lanes`, a tick every 10 ms, and a failed batch's backoff of 10 min: within a test
 * only a wake-up can bring a failed lane back.
 */
function loopWithLongBackoff(lanes: PartitionStepper[], onTick: () => void): { stop: () => Promise<void> } {
  let stop!: () => void;
  const stopped = new Promise<void>((resolve) => (stop = resolve));
  const loop = runConsumerLoop({ refresh: async () => lanes }, { logger: createLogger({ level: 'silent' }), stopped, pollMs: 5, tickMs: 10, retryBaseMs: 600_000, onTick });
  return {
    stop: async () => {
      stop();
      await loop;
    },
  };
}

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

test('lanes failing on one cause: one line for the spell, however many tries, and one when it is over', async () => {
  const lines: { msg: string }[] = [];
  const logger = createLogger({ level: 'info', destination: { write: (text: string) => void lines.push(JSON.parse(text)) } });
  let failing = true;
  let tries = 0;
  const lanes: PartitionStepper[] = [0, 1, 2, 3].map((k) => ({
    name: `p0${k}`,
    step: async () => {
      if (!failing) return idle;
      tries++;
      throw new Error('connection terminated');
    },
  }));
  let stop!: () => void;
  const stopped = new Promise<void>((resolve) => (stop = resolve));
  const loop = runConsumerLoop({ refresh: async () => lanes }, { logger, stopped, pollMs: 5, tickMs: 10 });
  try {
    // Each lane retries after 500 ms, then 1 s: two tries each at least.
    await waitFor('every lane to fail twice', () => tries >= 8, 10_000);
    failing = false;
    await waitFor('the recovery line', () => lines.some((l) => l.msg === 'consumer batches recovered'), 10_000);
  } finally {
    stop();
    await loop;
  }
  assert.equal(lines.filter((l) => l.msg.startsWith('consumer batch failed')).length, 1, lines.map((l) => l.msg).join('\n'));
  assert.equal(lines.filter((l) => l.msg === 'consumer batches recovered').length, 1);
});

test('a lane in backoff tries again as soon as the tick, failing with it, works again', async () => {
  let down = true;
  let failedSteps = 0;
  let applied = 0;
  const lane: PartitionStepper = {
    name: 'p00',
    step: async () => {
      if (down) {
        failedSteps++;
        throw new Error('connection terminated');
      }
      applied++;
      return idle;
    },
  };
  const loop = loopWithLongBackoff([lane], () => {
    if (down) throw new Error('connection terminated');
  });
  try {
    await waitFor('the lane to fail once', () => failedSteps === 1);
    down = false;
    await waitFor('the lane to apply again, long before its backoff ends', () => applied > 0, 30_000);
    assert.equal(failedSteps, 1);
  } finally {
    await loop.stop();
  }
});

test('a lane stuck on a cause of its own is woken once per spell, however often others and the tick recover', async () => {
  let tickCalls = 0;
  const tries = { poison: 0, flaky: 0 };
  let applied = 0;
  const poison: PartitionStepper = {
    name: 'p00',
    step: async () => {
      tries.poison++;
      throw new Error('invalid input syntax for type json');
    },
  };
  // Fails every other try with the shared cause; it comes back only when the tick's recovery wakes it.
  const flaky: PartitionStepper = {
    name: 'p01',
    step: async () => {
      tries.flaky++;
      if (tries.flaky % 2 === 1) throw new Error('connection terminated');
      applied++;
      return idle;
    },
  };
  // The tick fails and recovers in turn: a recovery at every other tick.
  const loop = loopWithLongBackoff([poison, flaky], () => {
    if (++tickCalls % 2 === 1) throw new Error('connection terminated');
  });
  try {
    await waitFor('the flaky lane to come back ten times', () => applied >= 10, 30_000);
    assert.equal(tries.poison, 2, 'the poison lane: its first try, and one wake-up in its spell');
  } finally {
    await loop.stop();
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
