/**
 * The embedded profile: the existing SQLite classes, unchanged, behind the Storage interface.
 * Files live under `<data-dir>/<env>/` exactly as before (config.ts).
 */
import { ingestStatsDbFile, queueDbFile, viewDbFile, controlDbFile, type Environment } from '../config.js';
import type { ControlPlane } from '../control/control-plane.js';
import { loadMasterKey, SecretBox } from '../control/secret-box.js';
import { SqliteControlPlane } from '../control/sqlite-control-plane.js';
import type { EventQueue, QueueCommitObserver } from '../queue/event-queue.js';
import { SqliteEventQueue } from '../queue/sqlite-event-queue.js';
import { openQueueDatabase, readRecords, SqliteAcceptedCounts } from '../queue/sqlite-queue-store.js';
import { SqliteQueueRetention } from '../queue/sqlite-queue-retention.js';

/** How often the consumer prunes the queue (when a retention is set). */
const RETENTION_EVERY_MS = 60_000;
import { SqliteIngestStatsStore, SqliteViewStore } from '../merged-view/sqlite-view-store.js';
import type { IngestStatsStore } from '../merged-view/view-store.js';
import { lagOf, SqliteQueueSource } from '../consumer/sqlite-queue-source.js';
import { runConsumerLoop, VIEW_CONSUMER, ViewConsumer } from '../consumer/view-consumer.js';
import type { ConsumerRunOptions, QueueReader, Storage } from './storage.js';

export class SqliteStorage implements Storage {
  readonly profile = 'sqlite' as const;
  readonly location: string;
  readonly #dataDir: string;
  readonly #env: Environment;
  #control: ControlPlane | null = null;
  #view: SqliteViewStore | null = null;
  #source: SqliteQueueSource | null = null;
  #accepted: SqliteAcceptedCounts | null = null;
  readonly #closables: { close(): Promise<void> }[] = [];

  constructor(dataDir: string, env: Environment) {
    this.#dataDir = dataDir;
    this.#env = env;
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
    return (this.#control ??= new SqliteControlPlane(controlDbFile(this.#dataDir, this.#env), new SecretBox(loadMasterKey(this.#dataDir))));
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

  viewStore(): SqliteViewStore {
    return (this.#view ??= new SqliteViewStore(viewDbFile(this.#dataDir, this.#env)));
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
    const store = this.viewStore();
    const queueFile = queueDbFile(this.#dataDir, this.#env);
    const source = new SqliteQueueSource(queueFile);
    // The consumer knows what was applied, so it prunes the queue (queue/sqlite-queue-retention.ts).
    const retentionMs = options.retentionMs ?? 0;
    const retention = retentionMs > 0 ? new SqliteQueueRetention(queueFile) : null;
    let lastRetention = 0;
    const pruneQueue = async () => {
      if (!retention || Date.now() - lastRetention < (options.retentionEveryMs ?? RETENTION_EVERY_MS)) return;
      lastRetention = Date.now();
      const round = retention.run(await store.offset(VIEW_CONSUMER), retentionMs);
      if (round.segmentsDeleted > 0 || round.filesDeleted > 0) {
        options.logger.info({ deleted_segments: round.segmentsDeleted, deleted_body_files: round.filesDeleted }, 'queue retention');
      }
    };
    const consumer = new ViewConsumer(store, source, { batchSize: options.batchSize, mergeWindowMs: options.mergeWindowMs });
    options.logger.info({ env: this.#env, pid: process.pid, next_seq: await store.offset(VIEW_CONSUMER) }, 'consumer started');
    try {
      await runConsumerLoop(consumer, {
        logger: options.logger,
        stopped: options.stopped,
        ...(options.pollMs !== undefined ? { pollMs: options.pollMs } : {}),
        onTick: async () => {
          await options.onTick?.();
          await store.heartbeat({ consumer: VIEW_CONSUMER, pid: process.pid, at: Date.now() });
          await pruneQueue();
        },
      });
    } finally {
      await store.heartbeat({ consumer: VIEW_CONSUMER, pid: process.pid, at: 0 }).catch(() => undefined);
      retention?.close();
      await source.close();
    }
  }

  async close(): Promise<void> {
    for (const c of this.#closables.splice(0)) await c.close();
    this.#accepted = null;
    await this.#source?.close();
    await this.#view?.close();
    await this.#control?.close();
    this.#source = this.#view = this.#control = null;
  }
}
