/**
 * The one consumer loop, over a partition assignment, for both profiles.
 *
 * A partition is anything with a `step()` that applies one batch of its records and its offset in
 * one transaction (view-consumer.ts): the embedded profile assigns all its view partitions (each
 * stepped in a worker thread of its own, sqlite-partition-thread.ts), PostgreSQL the partitions
 * this worker holds a lease on. The loop runs one lane per assigned partition, concurrently:
 * a lane steps until its partition has nothing new, then polls; a failed batch is retried with
 * exponential backoff (250 ms doubling to 30 s) without holding up the other lanes, and said in the
 * log once per error and spell, not once per try (lane-failure-log.ts). When something that failed
 * works again (the tick or the assignment: every lane in backoff; a lane: those that failed with
 * its error), those lanes try at once, each at most once per spell: after an outage of the
 * database they all resume within a tick, not at the end of their backoff, and a lane stuck on a
 * cause of its own keeps its backoff. Beside the
 * lanes, the control part re-reads the assignment (lease renewal), runs the tick (heartbeat,
 * merge-window refresh; told how many lanes are failing, so a heartbeat can mean "applying", not
 * merely "alive"), schedules retention, and logs progress every 10 s (counts only, never
 * identifiers or contents). On stop, each lane finishes the batch in progress; then the
 * assignment is released (leases given back).
 *
 * The loop holds no state that matters for correctness: offsets live with the view, so a process
 * killed at any point is simply started again.
 */
import type { Logger } from '../observability/logger.js';
import { FailureLatch } from '../model/failure-latch.js';
import { LaneFailureLog } from './lane-failure-log.js';
import type { StepResult } from './view-consumer.js';

export interface PartitionStepper {
  /** For logs, e.g. `p01`. */
  readonly name: string;
  step(): Promise<StepResult>;
}

export interface PartitionAssignment {
  /** The partitions to apply from now on; called at start and every `refreshMs`. */
  refresh(): Promise<readonly PartitionStepper[]>;
  readonly refreshMs?: number;
  /** After the last batch: give the partitions back (leases), stop threads. */
  release?(): Promise<void>;
}

/** A lane's idle poll interval when none is given (ms). */
export const DEFAULT_POLL_MS = 100;

/** What the tick is told of the lanes. */
export interface LaneHealth {
  /** Lanes whose last batch failed (retrying with backoff); 0 when every lane applies or idles. */
  readonly failingLanes: number;
}

export interface ConsumerLoopOptions {
  readonly logger: Logger;
  /** Resolves when the loop must stop (after the batches in progress). */
  readonly stopped: Promise<void>;
  /** Idle poll interval of a lane (default DEFAULT_POLL_MS, 100 ms). */
  readonly pollMs?: number;
  /** Heartbeat, merge-window refresh; every `tickMs` (default 2 s). */
  readonly onTick?: (health: LaneHealth) => Promise<void> | void;
  readonly tickMs?: number;
  /** A failed batch's first backoff (ms, default 250; doubling per consecutive failure to 30 s at most, at least this). */
  readonly retryBaseMs?: number;
  /** Queue retention, every `everyMs` (first run one period after start). */
  readonly retention?: { readonly everyMs: number; run(): Promise<void> };
}

export async function runConsumerLoop(assignment: PartitionAssignment, options: ConsumerLoopOptions): Promise<void> {
  const { logger } = options;
  const pollMs = options.pollMs ?? DEFAULT_POLL_MS;
  const tickMs = options.tickMs ?? 2000;
  const retryBaseMs = options.retryBaseMs ?? 250;
  const refreshMs = assignment.refreshMs ?? Number.POSITIVE_INFINITY;
  let stop = false;
  const wakers = new Set<() => void>();
  void options.stopped.then(() => {
    stop = true;
    for (const wake of [...wakers]) wake();
  });
  /** Lanes waiting out a failed batch's backoff: woken early once the storage answers again (below). */
  const backoffWakers = new Map<PartitionStepper, () => void>();
  const sleep = (ms: number, backoffOf?: PartitionStepper) =>
    new Promise<void>((resolve) => {
      if (stop) return resolve();
      const done = () => {
        clearTimeout(timer);
        wakers.delete(done);
        if (backoffOf && backoffWakers.get(backoffOf) === done) backoffWakers.delete(backoffOf);
        resolve();
      };
      const timer = setTimeout(done, ms);
      wakers.add(done);
      if (backoffOf) backoffWakers.set(backoffOf, done);
    });
  /**
   * Each lane whose last batch failed (its failing spell): the consecutive failed batches (the
   * backoff; the map's size is what the tick is told), the last error, and whether it was woken.
   */
  const failures = new Map<PartitionStepper, { count: number; lastError: string; woken: boolean }>();
  // Something that failed with the lanes works again: a shared cause (the database back after an
  // outage) has likely gone, so the lanes in backoff try now instead of at the end of a wait of up
  // to 30 s. The tick or the assignment recovering wakes every lane in backoff; a lane recovering
  // wakes those whose last error was its own (the same cause). Each lane is woken at most once per
  // failing spell, so a lane stuck on a cause of its own keeps its backoff however often others
  // recover (a lane woken in vain backs off again, from where it was).
  const wakeBackoffs = (sameErrorAs?: string) => {
    for (const [lane, wake] of [...backoffWakers]) {
      const failure = failures.get(lane);
      if (!failure || failure.woken || (sameErrorAs !== undefined && failure.lastError !== sameErrorAs)) continue;
      failure.woken = true;
      wake();
    }
  };

  const totals = { records: 0, created: 0, merged: 0, discarded: 0 };
  const lanes = new Map<PartitionStepper, Promise<void>>();
  let assigned = new Set<PartitionStepper>();
  // Said once per spell, not once per try (lane-failure-log.ts, model/failure-latch.ts).
  const failureLog = new LaneFailureLog(logger);
  const assignmentLatch = new FailureLatch(
    (error) => logger.error({ err: { message: error.message } }, 'consumer assignment failed; retrying'),
    () => {
      logger.info({}, 'consumer assignment recovered');
      wakeBackoffs();
    },
  );
  const tickLatch = new FailureLatch(
    (error) => logger.warn({ err: { message: error.message } }, 'consumer tick failed'),
    () => {
      logger.info({}, 'consumer tick recovered');
      wakeBackoffs();
    },
  );

  const lane = async (partition: PartitionStepper) => {
    while (!stop && assigned.has(partition)) {
      let result: StepResult;
      try {
        result = await partition.step();
        const ended = failures.get(partition);
        if (ended) {
          failures.delete(partition);
          wakeBackoffs(ended.lastError);
        }
      } catch (error) {
        const failure = failures.get(partition) ?? { count: 0, lastError: '', woken: false };
        failure.count++;
        failure.lastError = (error as Error).message;
        failures.set(partition, failure);
        const delay = Math.max(retryBaseMs, Math.min(30_000, retryBaseMs * 2 ** Math.min(failure.count, 7)));
        failureLog.failed(partition.name, error as Error, delay);
        await sleep(delay, partition);
        continue;
      }
      totals.records += result.records;
      totals.created += result.created;
      totals.merged += result.merged;
      totals.discarded += result.discarded;
      if (!result.moved) await sleep(pollMs);
      else await new Promise<void>((resolve) => setImmediate(resolve));
    }
  };

  const reassign = async () => {
    const next = new Set(await assignment.refresh());
    const before = [...assigned].map((p) => p.name).sort().join(',');
    assigned = next;
    for (const partition of next) {
      if (!lanes.has(partition)) {
        lanes.set(partition, lane(partition).finally(() => {
          lanes.delete(partition);
          failures.delete(partition);
        }));
      }
    }
    const after = [...next].map((p) => p.name).sort().join(',');
    if (before !== after) logger.info({ partitions: after }, 'consumer partitions changed');
  };

  let lastRefresh = Number.NEGATIVE_INFINITY;
  let lastTick = 0;
  let lastRetention = Number.NEGATIVE_INFINITY;
  let lastReport = Date.now();
  try {
    while (!stop) {
      const now = Date.now();
      if (now - lastRefresh >= refreshMs) {
        lastRefresh = now;
        await reassign().then(
          () => assignmentLatch.succeeded(),
          (error: Error) => assignmentLatch.failed(error),
        );
      }
      if (options.onTick && now - lastTick >= tickMs) {
        lastTick = now;
        try {
          await options.onTick({ failingLanes: failures.size });
          tickLatch.succeeded();
        } catch (error) {
          tickLatch.failed(error as Error);
        }
      }
      failureLog.check(failures.size);
      if (options.retention && now - lastRetention >= options.retention.everyMs) {
        lastRetention = now;
        await options.retention.run().catch((error: Error) => logger.error({ err: { message: error.message } }, 'queue retention failed'));
      }
      if (now - lastReport >= 10_000 && totals.records > 0) {
        logger.info({ ...totals }, 'consumer progress');
        totals.records = totals.created = totals.merged = totals.discarded = 0;
        lastReport = now;
      }
      await sleep(Math.min(250, tickMs, refreshMs));
    }
  } finally {
    stop = true;
    for (const wake of [...wakers]) wake();
    await Promise.allSettled([...lanes.values()]);
    await assignment.release?.();
  }
}
