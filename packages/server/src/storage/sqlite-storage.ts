/**
 * The embedded profile: the SQLite classes behind the Storage interface. Files live under
 * `<data-dir>/<env>/` (config.ts). For the consumer it provides the partition assignment (all the
 * view's partitions, consumer/sqlite-partitions.ts), the view store and queue pruning; the loop
 * itself is consumer/consumer-loop.ts, shared with PostgreSQL.
 */
import { existsSync } from 'node:fs';
import { ENVIRONMENTS, ingestStatsDbFile, queueDbFile, viewDbFile, controlDbFile, type Environment } from '../config.js';
import type { ControlPlane } from '../control/control-plane.js';
import { masterKeyLoader } from '../control/secret-box.js';
import { ControlPlaneService } from '../control/control-plane-service.js';
import { controlFileHoldsSecrets, SqliteControlStore } from '../control/sqlite-control-store.js';
import type { EventQueue, QueueCommitObserver } from '../queue/event-queue.js';
import { SqliteEventQueue } from '../queue/sqlite-event-queue.js';
import { openQueueDatabase, readRecords, SqliteAcceptedCounts } from '../queue/sqlite-queue-store.js';
import { SqliteQueueRetention } from '../queue/sqlite-queue-retention.js';
import { SqliteLifecycleBackend } from '../lifecycle/sqlite-lifecycle-backend.js';
import { SqliteIngestStatsStore } from '../merged-view/sqlite-view-store.js';
import { SqlitePartitionedView } from '../merged-view/partitioned-view-store.js';
import { MAX_VIEW_PARTITIONS } from '../merged-view/sqlite-view-layout.js';
import type { IngestStatsStore } from '../merged-view/view-store.js';
import { lagOf } from '../consumer/consumer-lag.js';
import { SqliteQueueSource } from '../consumer/sqlite-queue-source.js';
import { VIEW_CONSUMER } from '../consumer/view-consumer.js';
import { runConsumerLoop } from '../consumer/consumer-loop.js';
import { SqlitePartitions } from '../consumer/sqlite-partitions.js';
import { retryWhileBusy } from './sqlite-busy.js';

/** How often the consumer prunes the queue (when a retention is set). */
const RETENTION_EVERY_MS = 60_000;
/** View partitions (consumer threads) of a new view. */
export const DEFAULT_VIEW_PARTITIONS = 2;
import type { ConsumerRunOptions, QueueReader, Storage } from './storage.js';

export class SqliteStorage implements Storage {
  readonly profile = 'sqlite' as const;
  readonly location: string;
  readonly #dataDir: string;
  readonly #env: Environment;
  #control: ControlPlane | null = null;
  #view: SqlitePartitionedView | null = null;
  #source: SqliteQueueSource | null = null;
  #accepted: SqliteAcceptedCounts | null = null;
  #lifecycle: SqliteLifecycleBackend | null = null;
  readonly #closables: { close(): Promise<void> }[] = [];

  readonly #masterKeyFile: string | undefined;

  constructor(dataDir: string, env: Environment, options: { masterKeyFile?: string | undefined } = {}) {
    this.#dataDir = dataDir;
    this.#env = env;
    this.#masterKeyFile = options.masterKeyFile;
    this.location = `embedded SQLite in ${dataDir}/${env}`;
  }

  /**
   * Creates every SQLite file of the environment with its schema, in WAL mode, before any other
   * process opens them. Under `serve --workers N` the workers and the consumer start at the same
   * moment; two connections switching one brand-new file to WAL can fail with "database is locked"
   * without ever consulting the busy handler, so the primary does it first, alone.
   */
  async prepareFiles(): Promise<void> {
    this.controlPlane();
    openQueueDatabase(queueDbFile(this.#dataDir, this.#env)).close();
    this.viewStore();
    await new SqliteIngestStatsStore(ingestStatsDbFile(this.#dataDir, this.#env)).close();
  }

  controlPlane(): ControlPlane {
    // The master key is loaded (and checked against the control plane) when a secret is first sealed
    // or opened, so commands that never unseal (queue export, events, stats) work without it.
    return (this.#control ??= new ControlPlaneService(
      new SqliteControlStore(controlDbFile(this.#dataDir, this.#env), {
        sealedElsewhere: () => otherEnvironmentsHoldSecrets(this.#dataDir, this.#env),
      }),
      masterKeyLoader({ dataDir: this.#dataDir, keyFile: this.#masterKeyFile }),
    ));
  }

  openQueue(observer?: QueueCommitObserver): EventQueue {
    const queue = new SqliteEventQueue(queueDbFile(this.#dataDir, this.#env), observer);
    this.#closables.push(queue);
    return queue;
  }

  queueReader(): QueueReader {
    const file = queueDbFile(this.#dataDir, this.#env);
    return {
      read: async (options) => {
        // As `queue export` always did: opening creates the file and schema when missing.
        const db = openQueueDatabase(file);
        try {
          return readRecords(db, options);
        } finally {
          db.close();
        }
      },
      lag: async (nowMs) => {
        const nextSeq = await this.viewStore().offset(VIEW_CONSUMER);
        this.#source ??= new SqliteQueueSource(file);
        return lagOf(nextSeq, this.#source.position(nextSeq), nowMs);
      },
      acceptedCounts: async (dataSetId, sinceHourMs) => {
        if (!this.#accepted) this.#closables.push((this.#accepted = new SqliteAcceptedCounts(file)));
        return this.#accepted.read(dataSetId, sinceHourMs);
      },
    };
  }

  viewStore(): SqlitePartitionedView {
    return (this.#view ??= new SqlitePartitionedView(viewDbFile(this.#dataDir, this.#env)));
  }

  ingestStats(options: { busyTimeoutMs?: number } = {}): IngestStatsStore {
    const store = new SqliteIngestStatsStore(ingestStatsDbFile(this.#dataDir, this.#env), options);
    this.#closables.push(store);
    return store;
  }

  async durabilityWarning(): Promise<null> {
    return null; // WAL with synchronous=FULL, set by the queue itself
  }

  clusterRateLimiter(): null {
    return null;
  }

  async runConsumer(options: ConsumerRunOptions): Promise<void> {
    const view = this.viewStore();
    const queueFile = queueDbFile(this.#dataDir, this.#env);
    const requested = options.viewPartitions ?? DEFAULT_VIEW_PARTITIONS;
    if (!Number.isInteger(requested) || requested < 1 || requested > MAX_VIEW_PARTITIONS) throw new Error(`view partitions must be 1 to ${MAX_VIEW_PARTITIONS}`);
    // Recording the layout writes view.db, and the log line below opens every partition file: a lock
    // held past the busy timeout (storage/sqlite-busy.ts) delays the start, never ends the worker.
    const prepared = await retryWhileBusy(async () => ({ partitions: view.fixPartitions(requested), nextSeq: await view.offset(VIEW_CONSUMER) }), {
      logger: options.logger,
      stopped: options.stopped,
      step: 'preparing the view partitions',
    });
    if (!prepared) return;
    const { partitions, nextSeq } = prepared;
    if (partitions !== requested && options.viewPartitions !== undefined) {
      options.logger.warn({ requested, partitions }, 'the view was created with another partition count; keeping it (delete the view files to change it)');
    }
    const assignment = new SqlitePartitions({
      queueFile,
      viewFile: viewDbFile(this.#dataDir, this.#env),
      partitions,
      batchSize: options.batchSize,
      ...(options.viewHotLinks !== undefined ? { hotLinks: options.viewHotLinks } : {}),
      windows: options.mergeWindows ?? (() => []),
    });
    // The consumer knows what was applied (the lowest partition offset), so it prunes the queue
    // (queue/sqlite-queue-retention.ts).
    const retentionMs = options.retentionMs ?? 0;
    const retention = retentionMs > 0 ? new SqliteQueueRetention(queueFile) : null;
    options.logger.info({ env: this.#env, pid: process.pid, partitions, next_seq: nextSeq }, 'consumer started');
    try {
      await runConsumerLoop(assignment, {
        logger: options.logger,
        stopped: options.stopped,
        ...(options.pollMs !== undefined ? { pollMs: options.pollMs } : {}),
        onTick: async () => {
          await options.onTick?.();
          assignment.windowsChanged();
          await view.heartbeat({ consumer: VIEW_CONSUMER, pid: process.pid, at: Date.now() });
        },
        ...(retention
          ? {
              retention: {
                everyMs: options.retentionEveryMs ?? RETENTION_EVERY_MS,
                run: async () => {
                  const round = retention.run(await view.offset(VIEW_CONSUMER), retentionMs);
                  await retention.truncateWal(); // issue 29: no copy of deleted segments left in the WAL
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

  lifecycle(): SqliteLifecycleBackend {
    if (!this.#lifecycle) this.#closables.push((this.#lifecycle = new SqliteLifecycleBackend(this.#dataDir, this.#env)));
    return this.#lifecycle;
  }

  async close(): Promise<void> {
    for (const c of this.#closables.splice(0)) await c.close();
    this.#lifecycle = null;
    this.#accepted = null;
    await this.#source?.close();
    await this.#view?.close();
    await this.#control?.close();
    this.#source = this.#view = this.#control = null;
  }
}

/**
 * Whether another environment of the data dir (they share master.key) holds sealed secrets: then a
 * missing master.key is an error, never a reason to generate a new one.
 */
function otherEnvironmentsHoldSecrets(dataDir: string, env: Environment): boolean {
  for (const other of ENVIRONMENTS) {
    if (other === env) continue;
    const file = controlDbFile(dataDir, other);
    if (!existsSync(file)) continue;
    if (controlFileHoldsSecrets(file)) return true;
  }
  return false;
}
