/**
 * The embedded profile's consumer run (`worker`, `Storage.runConsumer` of storage/sqlite-storage.ts;
 * PostgreSQL's is consumer/postgres-partitions.ts): the view's partition count (fixed when the view
 * is first consumed), its partition threads (sqlite-partitions.ts) in the loop both profiles share
 * (consumer-loop.ts), the heartbeat, and queue retention, which the consumer runs since it knows
 * what was applied (the lowest partition offset).
 */
import { existsSync } from 'node:fs';
import type { Environment } from '../config.js';
import type { SqlitePartitionedView } from '../merged-view/partitioned-view-store.js';
import { MAX_VIEW_PARTITIONS } from '../merged-view/sqlite-view-layout.js';
import { VIEW_CONSUMER } from '../model/consumer-offsets.js';
import { stampLegacyMergeWindows } from '../queue/sqlite-legacy-windows.js';
import { openQueueDatabase } from '../queue/sqlite-queue-store.js';
import { SqliteQueueRetention } from '../queue/sqlite-queue-retention.js';
import { runConsumerLoop } from './consumer-loop.js';
import type { ConsumerRunOptions } from './consumer-run-options.js';
import { retryWhileBusy } from './sqlite-busy.js';
import { SqlitePartitions } from './sqlite-partitions.js';

/** How often the consumer prunes the queue (when a retention is set). */
const RETENTION_EVERY_MS = 60_000;
/** View partitions (consumer threads) of a new view. */
export const DEFAULT_VIEW_PARTITIONS = 2;

/** Runs the merged-view consumer over the view's partitions until `options.stopped`. */
export async function runSqliteConsumer(
  view: SqlitePartitionedView,
  files: { readonly env: Environment; readonly queueFile: string; readonly viewFile: string },
  options: ConsumerRunOptions,
): Promise<void> {
  const { queueFile } = files;
  const requested = options.viewPartitions ?? DEFAULT_VIEW_PARTITIONS;
  if (!Number.isInteger(requested) || requested < 1 || requested > MAX_VIEW_PARTITIONS) throw new Error(`view partitions must be 1 to ${MAX_VIEW_PARTITIONS}`);
  // Recording the layout writes view.db, and the log line below opens every partition file: a lock
  // held past the busy timeout (consumer/sqlite-busy.ts) delays the start, never ends the worker.
  const requestedKind = options.viewLayout ?? 'data-sets';
  const prepared = await retryWhileBusy(async () => ({ layout: view.fixLayout({ partitions: requested, kind: requestedKind }), nextSeq: await view.offset(VIEW_CONSUMER) }), {
    logger: options.logger,
    stopped: options.stopped,
    step: 'preparing the view partitions',
  });
  if (!prepared) return;
  const { layout, nextSeq } = prepared;
  const { partitions } = layout;
  if ((partitions !== requested && options.viewPartitions !== undefined) || (layout.kind !== requestedKind && options.viewLayout !== undefined)) {
    options.logger.warn(
      { requested, partitions, requested_layout: requestedKind, layout: layout.kind },
      'the view was created with another partition count or layout; keeping it (delete the view files to change it)',
    );
  }
  // Segments an earlier version queued without their merge window get their data set's window now,
  // before any partition applies one (queue/sqlite-legacy-windows.ts): one empty index probe once
  // there are none.
  const stamped = existsSync(queueFile)
    ? await retryWhileBusy(
        async () => {
          const db = openQueueDatabase(queueFile);
          try {
            return { segments: stampLegacyMergeWindows(db, options.mergeWindowMs) };
          } finally {
            db.close();
          }
        },
        { logger: options.logger, stopped: options.stopped, step: 'stamping the merge windows of segments an earlier version queued' },
      )
    : { segments: 0 };
  if (!stamped) return;
  if (stamped.segments > 0) options.logger.info({ segments: stamped.segments }, 'merge windows stamped on segments an earlier version queued');
  const assignment = new SqlitePartitions({
    queueFile,
    viewFile: files.viewFile,
    partitions,
    batchSize: options.batchSize,
    hotLinks: options.viewHotLinks,
    windows: options.mergeWindows ?? (() => []),
    sharded: layout.kind === 'sharded',
  });
  // The consumer knows what was applied (the lowest partition offset), so it prunes the queue
  // (queue/sqlite-queue-retention.ts).
  const retentionMs = options.retentionMs ?? 0;
  const retention = retentionMs > 0 ? new SqliteQueueRetention(queueFile, { oldCopiesEveryMs: options.oldCopiesEveryMs }) : null;
  options.logger.info({ env: files.env, pid: process.pid, partitions, layout: layout.kind, next_seq: nextSeq }, 'consumer started');
  try {
    await runConsumerLoop(assignment, {
      logger: options.logger,
      stopped: options.stopped,
      pollMs: options.pollMs,
      onTick: async ({ failingLanes }) => {
        await options.onTick?.();
        assignment.windowsChanged();
        // The heartbeat says "applying", not "alive": while a lane's batches fail it stops, and
        // `worker status` reports the live process as stalled (issue 29). A beat written anyway
        // can succeed where the batch cannot: on a full disk it fits in WAL space the failed
        // batch allocated, which kept a stalled consumer looking healthy.
        if (failingLanes === 0) await view.heartbeat({ consumer: VIEW_CONSUMER, pid: process.pid, at: Date.now() });
      },
      ...(retention
        ? {
            retention: {
              everyMs: options.retentionEveryMs ?? RETENTION_EVERY_MS,
              run: async () => {
                const round = retention.run(await view.offset(VIEW_CONSUMER), retentionMs);
                await retention.clearOldCopies(); // issue 29: no copy of deleted segments left in queue.db or its WAL
                if (round.segmentsDeleted > 0 || round.filesDeleted > 0) {
                  options.logger.info({ deleted_segments: round.segmentsDeleted, deleted_body_files: round.filesDeleted }, 'queue retention');
                }
              },
            },
          }
        : {}),
    });
  } finally {
    await view.heartbeat({ consumer: VIEW_CONSUMER, pid: process.pid, at: 0 }).catch(() => undefined);
    retention?.close();
  }
}
