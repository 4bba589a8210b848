/**
 * One storage interface, two implementations: the embedded profile (SQLite files in the data dir,
 * sqlite-storage.ts) and the scale-out profile (one PostgreSQL database shared by every node,
 * postgres-storage.ts). `open-storage.ts` is the only place that chooses between them; everything
 * else (service, node primary, consumer, CLI) sees this interface.
 *
 * Ownership: everything a Storage hands out belongs to it; `close()` closes what is still open,
 * after the caller closed what it must flush first (the queue, the outcome recorder). Closing a
 * handed-out object twice is harmless.
 */
import type { CounterRow } from '../model/hourly-counters.js';
import type { ControlPlane } from '../control/control-plane.js';
import type { EventQueue, QueueCommitObserver, QueueRecord, ReadOptions } from '../queue/event-queue.js';
import type { IngestStatsStore, ViewStore } from '../merged-view/view-store.js';
import type { RateLimiter } from '../rate-limit/rate-limiter.js';
import type { ConsumerLag } from '../model/consumer-lag.js';
import type { LifecycleBackend } from '../lifecycle/lifecycle-backend.js';
import type { ConsumerRunOptions } from '../consumer/consumer-run-options.js';

export type StorageProfile = 'sqlite' | 'postgres';

/** Reading the queue outside the request path: `queue export`, consumer lag. */
export interface QueueReader {
  read(options: ReadOptions): Promise<QueueRecord[]>;
  /** The merged-view consumer's lag (all partitions together where the queue is partitioned). */
  lag(nowMs: number): Promise<ConsumerLag>;
  /**
   * Accepted events of a data set per hour of arrival (counter rows named `accepted`) from the hour
   * `sinceHourMs` on, as counted by the queue commits that stored them: exact after any crash.
   * Null when the queue predates these counts (an embedded queue file no writer has opened since).
   */
  acceptedCounts(dataSetId: string, sinceHourMs: number): Promise<CounterRow[] | null>;
}

export interface Storage {
  readonly profile: StorageProfile;
  /** Where the data lives, for logs (never a password). */
  readonly location: string;
  controlPlane(): ControlPlane;
  /** The durable queue of a serving process (one per process: it owns the group commit). */
  openQueue(observer?: QueueCommitObserver): EventQueue;
  queueReader(): QueueReader;
  viewStore(): ViewStore;
  /** Ingest outcome counters; `busyTimeoutMs` bounds how long a flush may wait on a serving process. */
  ingestStats(options?: { busyTimeoutMs?: number }): IngestStatsStore;
  /**
   * A rate limiter whose authority is shared by every node of a cluster, or null when the
   * authority is the node itself (a LocalRateLimiter, or the primary's over IPC). `onError`: the
   * authority became unreachable (leases fail open meanwhile); `onRecovered`: it answers again.
   */
  clusterRateLimiter(options?: { onError?: (error: Error) => void; onRecovered?: () => void }): RateLimiter | null;
  /** A warning when the store would acknowledge commits that are not durable (fsync off…), else null. */
  durabilityWarning(): Promise<string | null>;
  /** Runs the merged-view consumer of this process until `stopped`. */
  runConsumer(options: ConsumerRunOptions): Promise<void>;
  /** Retention and deletion requests (lifecycle/lifecycle-backend.ts); closed with the storage. */
  lifecycle(): LifecycleBackend;
  close(): Promise<void>;
}
