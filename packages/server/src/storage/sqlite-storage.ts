/**
 * The embedded profile: the SQLite classes behind the Storage interface. Files live under
 * `<data-dir>/<env>/` (config.ts). The consumer's run over the view's partitions is
 * consumer/sqlite-consumer.ts (PostgreSQL's: consumer/postgres-partitions.ts); this class only
 * hands it the files and the view store.
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
import { SqliteLifecycleBackend } from '../lifecycle/sqlite-lifecycle-backend.js';
import { SqliteIngestStatsStore } from '../merged-view/sqlite-view-store.js';
import { SqlitePartitionedView } from '../merged-view/partitioned-view-store.js';
import type { IngestStatsStore } from '../merged-view/view-store.js';
import { lagOf } from '../model/consumer-lag.js';
import { SqliteQueueSource } from '../consumer/sqlite-queue-source.js';
import { VIEW_CONSUMER } from '../model/consumer-offsets.js';
import type { QueueReader, Storage } from './storage.js';
import type { ConsumerRunOptions } from '../consumer/consumer-run-options.js';
import { runSqliteConsumer } from '../consumer/sqlite-consumer.js';

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
    this.viewStore().openFiles();
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

  runConsumer(options: ConsumerRunOptions): Promise<void> {
    return runSqliteConsumer(this.viewStore(), { env: this.#env, queueFile: queueDbFile(this.#dataDir, this.#env), viewFile: viewDbFile(this.#dataDir, this.#env) }, options);
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
