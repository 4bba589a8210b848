/**
 * The consumer's CPU priority: the merged-view consumer (`ecapi-ingest worker`, also `serve`'s
 * child) runs its threads at a lower scheduling priority than the serving processes, nice 10 by
 * default (`worker --nice`, env ECAPI_WORKER_NICE; 0 leaves the priority alone).
 *
 * Why: ingestion first. A 200 promises that the events are stored, not that they are in the merged
 * view: the consumer is asynchronous, and a slow one must only show as lag (`worker status`,
 * `ecapi_consumer_lag_*`). At the same priority, though, its threads (one per view partition, the
 * main thread's checkpoints, V8's helpers) take their share of a small machine's cores from the
 * event loops that answer senders: on 2 cores the default node answered single events at 52-65%
 * of a bare HMAC+parse server's rate with its consumer on, 76-99% with it off; at nice 10, 21% more
 * than at nice 0 on an idle machine, and nice 19 no more than 10 (bench/README.md, issue 30). At a lower priority the scheduler gives the CPU to the serving processes whenever
 * both want it and to the consumer in the time they leave idle: under overload the lag grows
 * instead of the answers slowing down, and the consumer catches up when the load falls. On an idle
 * machine it changes nothing (a lone runnable thread gets a core whatever its nice).
 *
 * How: on Linux nice belongs to each thread (setpriority(PRIO_PROCESS, tid), which os.setPriority
 * calls with the id it is given); a new thread inherits its creator's value, and a thread that
 * already exists keeps its own when another one's changes. So the worker lowers every thread of
 * the process that exists (/proc/self/task: the main thread, V8's platform threads, libuv's pool),
 * before it starts its partition threads, which then inherit it; the list is walked again until
 * it shows no new thread, so one started meanwhile is not missed. Elsewhere (macOS, Windows)
 * os.setPriority sets the whole process's priority. It only ever lowers: a thread already at the
 * value or nicer keeps its own (lowering needs no privilege; raising would, and would undo an
 * operator's `nice`). A failure (a system-call filter, no /proc) logs one warning and the consumer
 * runs on at the priority it has.
 *
 * Nice orders threads that compete within one CPU cgroup (and, with the kernel's autogroup, one
 * session): `serve`'s consumer child shares its parent's. A worker run as its own systemd unit or
 * container competes through that unit's CPU weight as well (CPUWeight=, --cpu-shares); a unit's
 * Nice= is the same as --nice.
 */
import { readdirSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';
import type { Logger } from '../observability/logger.js';

/** `worker --nice` when not given: low enough that the serving processes win the CPU when both want it. */
export const DEFAULT_CONSUMER_NICE = 10;
/** The lowest priority there is (POSIX nice 19). */
export const MAX_NICE = 19;

/** What lowering the priority needs from the process (the real one below; a fake in unit tests). */
export interface PriorityHost {
  readonly platform: NodeJS.Platform;
  /** Linux: the ids of this process's threads (/proc/self/task). */
  threadIds(): number[];
  /** The nice of thread `id` (Linux) or of the process (0 elsewhere). */
  getPriority(id: number): number;
  setPriority(id: number, nice: number): void;
}

export const processPriorityHost: PriorityHost = {
  platform: process.platform,
  threadIds: () => readdirSync('/proc/self/task').map(Number),
  getPriority: (id) => getPriority(id),
  setPriority: (id, nice) => setPriority(id, nice),
};

/** A thread that ended between the listing and the call: nothing to lower. */
function threadGone(error: unknown): boolean {
  const e = error as { code?: string; info?: { code?: string } };
  return e.info?.code === 'ESRCH' || e.code === 'ESRCH';
}

/** Sets `id` to `nice` unless it is there or nicer already; true when it was lowered. */
function lowerOne(host: PriorityHost, id: number, nice: number): boolean {
  if (host.getPriority(id) >= nice) return false;
  host.setPriority(id, nice);
  return true;
}

/**
 * Lowers every thread of this process to `nice` (0: leaves them alone) and logs the outcome once:
 * an info line with the number of threads lowered, or one warning. Never throws. Returns the
 * number of threads (elsewhere than Linux: processes) it lowered.
 */
export function lowerConsumerPriority(nice: number, logger: Logger, host: PriorityHost = processPriorityHost): number {
  if (nice <= 0) return 0;
  let lowered = 0;
  // Every failure is counted; the first one's message is logged.
  const failures = { count: 0, first: '' };
  const fail = (error: unknown, what: string) => {
    if (failures.count++ === 0) failures.first = `${what}: ${(error as Error).message}`;
  };
  if (host.platform !== 'linux') {
    try {
      if (lowerOne(host, 0, nice)) lowered++;
    } catch (error) {
      fail(error, 'setting the process priority');
    }
  } else {
    const seen = new Set<number>();
    for (let pass = 0; pass < 5; pass++) {
      let ids: number[];
      try {
        ids = host.threadIds();
      } catch (error) {
        // No list of threads: lower this one at least, so that the threads it starts later (the
        // partitions') inherit it; the ones that exist already keep theirs.
        fail(error, 'listing the threads (only the main thread and those it starts later are lowered)');
        try {
          if (lowerOne(host, 0, nice)) lowered++;
        } catch (inner) {
          fail(inner, 'setting the main thread priority');
        }
        break;
      }
      const fresh = ids.filter((id) => !seen.has(id));
      if (fresh.length === 0) break;
      for (const id of fresh) {
        seen.add(id);
        try {
          if (lowerOne(host, id, nice)) lowered++;
        } catch (error) {
          if (!threadGone(error)) fail(error, 'setting a thread priority');
        }
      }
    }
  }
  if (failures.count > 0) {
    logger.warn(
      { nice, threads: lowered, failed: failures.count, err: { message: failures.first } },
      'could not lower the consumer\'s CPU priority everywhere; it runs on, and competes with ingestion for the CPU where it kept its priority',
    );
  } else if (lowered > 0) {
    logger.info({ nice, threads: lowered }, 'consumer CPU priority lowered');
  }
  return lowered;
}
