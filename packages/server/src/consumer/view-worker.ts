/**
 * `ecapi-ingest worker`: the consumer process of one environment. `serve` starts one as a child
 * process (consumer-supervisor.ts) unless `--no-worker`; it can also run on its own.
 *
 * It reads queue.db read-only and writes only view.db, so a slow consumer never slows ingest: the
 * queue's commits never wait for it, and its lag is visible (`worker status`, admin /metrics).
 */
import { queueDbFile, viewDbFile, type Environment } from '../config.js';
import { DEFAULT_POLICY } from '../control/data-set-policy.js';
import { openControlPlane } from '../control/open-control-plane.js';
import type { ControlPlane } from '../control/control-plane.js';
import type { Logger } from '../observability/logger.js';
import { SqliteViewStore } from '../merged-view/sqlite-view-store.js';
import { SqliteQueueSource } from './sqlite-queue-source.js';
import { DEFAULT_BATCH_SIZE, runConsumerLoop, VIEW_CONSUMER, ViewConsumer } from './view-consumer.js';

/** Merge windows of the data sets, refreshed from the control plane. */
export class MergeWindows {
  #windows = new Map<string, number>();
  readonly #controlPlane: ControlPlane;

  constructor(controlPlane: ControlPlane) {
    this.#controlPlane = controlPlane;
  }

  async refresh(): Promise<void> {
    const next = new Map<string, number>();
    for (const dataSet of await this.#controlPlane.listDataSets()) next.set(dataSet.id, dataSet.policy.mergeWindowSeconds * 1000);
    this.#windows = next;
  }

  mergeWindowMs(dataSetId: string): number {
    return this.#windows.get(dataSetId) ?? DEFAULT_POLICY.mergeWindowSeconds * 1000;
  }
}

export interface ViewWorkerOptions {
  readonly dataDir: string;
  readonly env: Environment;
  readonly logger: Logger;
  /** Resolves when the worker must stop; the batch in progress completes first. */
  readonly stopped: Promise<void>;
  readonly batchSize?: number;
  readonly pollMs?: number;
}

export async function runViewWorker(options: ViewWorkerOptions): Promise<void> {
  const controlPlane = openControlPlane(options.dataDir, options.env);
  const windows = new MergeWindows(controlPlane);
  await windows.refresh();
  const store = new SqliteViewStore(viewDbFile(options.dataDir, options.env));
  const source = new SqliteQueueSource(queueDbFile(options.dataDir, options.env));
  const consumer = new ViewConsumer(store, source, {
    batchSize: options.batchSize ?? DEFAULT_BATCH_SIZE,
    mergeWindowMs: (dataSetId) => windows.mergeWindowMs(dataSetId),
  });
  options.logger.info({ env: options.env, pid: process.pid, next_seq: await store.offset(VIEW_CONSUMER) }, 'consumer started');
  try {
    await runConsumerLoop(consumer, {
      logger: options.logger,
      stopped: options.stopped,
      ...(options.pollMs !== undefined ? { pollMs: options.pollMs } : {}),
      onTick: async () => {
        await windows.refresh();
        await store.heartbeat({ consumer: VIEW_CONSUMER, pid: process.pid, at: Date.now() });
      },
    });
  } finally {
    await store.heartbeat({ consumer: VIEW_CONSUMER, pid: process.pid, at: 0 }).catch(() => undefined);
    await source.close();
    await store.close();
    await controlPlane.close();
    options.logger.info({ env: options.env }, 'consumer stopped');
  }
}
