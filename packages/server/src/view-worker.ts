/**
 * `ecapi-ingest worker`: the consumer process of one environment. `serve` starts one as a child
 * process (consumer/consumer-supervisor.ts) unless `--no-worker`; it can also run on its own.
 *
 * It reads queue.db and writes the view files; it writes queue.db only to prune applied records
 * (retention), never what ingest appends, so a slow consumer never slows ingest: the queue's commits
 * never wait for it, and its lag is visible (`worker status`, admin /metrics). Like every process it
 * opens its storage through storage/open-storage.ts, the one place that picks the profile. Its
 * first step lowers its threads' CPU priority (consumer/consumer-priority.ts), so that a busy
 * consumer yields the CPU to the serving processes and only falls behind. A start that meets a
 * locked SQLite file or an unreachable PostgreSQL database waits it out (consumer/sqlite-busy.ts).
 */
import type { ViewLayoutKind } from './merged-view/sqlite-view-layout.js';
import type { Environment } from './config.js';
import type { Logger } from './observability/logger.js';
import { openStorage } from './storage/open-storage.js';
import { DEFAULT_BATCH_SIZE } from './consumer/view-consumer.js';
import { MergeWindows } from './consumer/merge-windows.js';
import { LifecycleRunner } from './lifecycle/lifecycle-runner.js';
import { retryWhileBusy } from './consumer/sqlite-busy.js';
import { isDatabaseUnreachable } from './postgres/database-unreachable.js';
import { lowerConsumerPriority } from './consumer/consumer-priority.js';

export interface ViewWorkerOptions {
  readonly dataDir: string;
  readonly env: Environment;
  /** postgres://…: consume the shared PostgreSQL queue (several workers may run); absent: embedded. */
  readonly databaseUrl?: string | undefined;
  readonly logger: Logger;
  /** Resolves when the worker must stop; the batch in progress completes first. */
  readonly stopped: Promise<void>;
  readonly batchSize?: number;
  /** Embedded profile: view partitions applied in parallel, fixed when the view is first consumed. */
  readonly viewPartitions?: number;
  /** Embedded profile: the layout of a new view (merged-view/sqlite-view-layout.ts), fixed when it is first consumed. */
  readonly viewLayout?: ViewLayoutKind;
  /** Identifier links kept in memory: per view partition (embedded), per worker process (PostgreSQL). */
  readonly viewHotLinks?: number;
  readonly pollMs?: number;
  /** Consumed queue records older than this are deleted; 0 keeps everything. */
  readonly retentionMs?: number;
  /** How often retention runs (default one minute). */
  readonly retentionEveryMs?: number;
  /** How often view retention runs (default one minute). */
  readonly viewRetentionEveryMs?: number;
  /**
   * After view or queue retention deleted rows, the pages are scrubbed of old copies (embedded) or
   * the view's tables VACUUMed (PostgreSQL) at most this often (fs/old-copies-schedule.ts; default
   * 15 min, 0: after every round). The WAL is cut after every round; deletion requests clear all.
   */
  readonly oldCopiesEveryMs?: number;
  /**
   * Nice (0-19) of every thread of this process, set before any partition thread starts (they
   * inherit it; consumer/consumer-priority.ts); 0 or absent leaves the priority alone. The `worker`
   * command passes 10 unless told otherwise.
   */
  readonly nice?: number;
}

export async function runViewWorker(options: ViewWorkerOptions): Promise<void> {
  // First, while the process has only Node's own threads: ingestion before the consumer.
  lowerConsumerPriority(options.nice ?? 0, options.logger);
  // A file locked by another connection past its busy timeout (after a SIGKILL: a WAL recovery, a
  // checkpoint on close) delays the start; it is not a reason to exit (consumer/sqlite-busy.ts).
  const opened = await retryWhileBusy(
    async () => {
      const storage = await openStorage({ dataDir: options.dataDir, env: options.env, databaseUrl: options.databaseUrl });
      try {
        const windows = new MergeWindows(storage.controlPlane());
        await windows.refresh();
        return { storage, windows };
      } catch (error) {
        await storage.close();
        throw error;
      }
    },
    {
      logger: options.logger,
      stopped: options.stopped,
      step: 'opening the stores',
      // A PostgreSQL outage at the start is waited out the same way, not an exit: `serve` would
      // restart the worker after a backoff of up to 30 s, a line per restart, and a standalone
      // worker would stay down. A wrong password, a missing database or schema still exit.
      alsoWaitOut: {
        matches: (error) => options.databaseUrl !== undefined && isDatabaseUnreachable(error),
        message: 'the PostgreSQL database cannot be reached while the consumer starts; retrying',
      },
    },
  );
  if (!opened) return void options.logger.info({ env: options.env }, 'consumer stopped');
  const { storage, windows } = opened;
  try {
    // View retention and deletion requests, beside the consumer (lifecycle/lifecycle-runner.ts); it
    // stops with the worker, or when the consumer loop ends for any other reason (an error).
    let endLifecycle!: () => void;
    const consumerEnded = new Promise<void>((resolve) => (endLifecycle = resolve));
    const lifecycle = new LifecycleRunner({
      backend: storage.lifecycle(),
      controlPlane: storage.controlPlane(),
      logger: options.logger,
      retentionEveryMs: options.viewRetentionEveryMs,
      oldCopiesEveryMs: options.oldCopiesEveryMs,
    });
    const lifecycleDone = lifecycle.run(Promise.race([options.stopped, consumerEnded]));
    try {
      await storage.runConsumer({
        logger: options.logger,
        stopped: options.stopped,
        batchSize: options.batchSize ?? DEFAULT_BATCH_SIZE,
        // Absent ones take the consumer's defaults (`??` in consumer/sqlite-consumer.ts and consumer/postgres-partitions.ts).
        pollMs: options.pollMs,
        retentionMs: options.retentionMs,
        retentionEveryMs: options.retentionEveryMs,
        oldCopiesEveryMs: options.oldCopiesEveryMs,
        viewPartitions: options.viewPartitions,
        viewLayout: options.viewLayout,
        viewHotLinks: options.viewHotLinks,
        mergeWindowMs: (dataSetId) => windows.mergeWindowMs(dataSetId),
        mergeWindows: () => windows.entries(),
        onTick: () => windows.refresh(),
      });
    } finally {
      endLifecycle();
      await lifecycleDone;
    }
  } finally {
    await storage.close();
    options.logger.info({ env: options.env }, 'consumer stopped');
  }
}
