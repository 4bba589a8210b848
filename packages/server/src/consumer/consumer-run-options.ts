/**
 * What a process's merged-view consumer run is given (storage/storage.ts `Storage.runConsumer`), on
 * either profile: the embedded one (consumer/sqlite-consumer.ts)
 * and PostgreSQL (consumer/postgres-partitions.ts).
 */
import type { Logger } from '../observability/logger.js';
import type { ViewLayoutKind } from '../merged-view/sqlite-view-layout.js';

export interface ConsumerRunOptions {
  readonly logger: Logger;
  /** Resolves when the worker must stop; the batch in progress completes first. */
  readonly stopped: Promise<void>;
  readonly batchSize: number;
  readonly pollMs?: number;
  readonly mergeWindowMs: (dataSetId: string) => number;
  /** The same windows as entries (data set, ms), for partitions applied in other threads. */
  readonly mergeWindows?: () => readonly [string, number][];
  /** Embedded profile: view partitions (threads) when the view is first consumed (default 2). */
  readonly viewPartitions?: number;
  /**
   * Embedded profile: how a new view splits its state (merged-view/sqlite-view-layout.ts): by data
   * set (default), or `sharded` (one data set's records over the partitions, identities by data set).
   */
  readonly viewLayout?: ViewLayoutKind;
  /**
   * Identifier links kept in memory (0: none): per view partition on the embedded profile
   * (merged-view/view-hot-state.ts), per worker process on PostgreSQL (merged-view/postgres-hot-links.ts).
   */
  readonly viewHotLinks?: number;
  /** Every few seconds: refresh merge windows and the like. */
  readonly onTick?: () => Promise<void>;
  /** Queue retention (ms): consumed records older than this are deleted. */
  readonly retentionMs?: number;
  /** How often retention runs (ms); default one minute. */
  readonly retentionEveryMs?: number;
  /**
   * Embedded: after queue retention deleted segments, queue.db's pages are scrubbed of old copies at
   * most this often (ms; fs/old-copies-schedule.ts, default 15 min, 0: every round).
   */
  readonly oldCopiesEveryMs?: number;
}
