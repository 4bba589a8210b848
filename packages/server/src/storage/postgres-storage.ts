/**
 * The scale-out profile: everything in one PostgreSQL database (one schema per environment),
 * shared by every `serve` node, every `worker` and the CLI on any machine. The data dir keeps only
 * what is per machine: the master key (every node needs the same one: share the file or set
 * ECAPI_MASTER_KEY) and the TLS material.
 */
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import type { Environment } from '../config.js';
import type { ControlPlane } from '../control/control-plane.js';
import { masterKeyLoader } from '../control/secret-box.js';
import { ControlPlaneService } from '../control/control-plane-service.js';
import { PostgresControlStore } from '../control/postgres-control-store.js';
import type { EventQueue, QueueCommitObserver } from '../queue/event-queue.js';
import { acceptedCounts, PostgresEventQueue, readSegments } from '../queue/postgres-event-queue.js';
import { PostgresIngestStatsStore, PostgresViewStore } from '../merged-view/postgres-view-store.js';
import type { IngestStatsStore } from '../merged-view/view-store.js';
import { VIEW_CONSUMER } from '../model/consumer-offsets.js';
import { PostgresLeaseChannel } from '../rate-limit/postgres-lease-channel.js';
import { LeasedRateLimiter } from '../rate-limit/leased-rate-limiter.js';
import type { RateLimiter } from '../rate-limit/rate-limiter.js';
import { createPool, durabilityWarning, redactUrl, type Pool } from '../postgres/database.js';
import { partitionedLag, runPartitionedConsumer } from '../consumer/postgres-partitions.js';
import { DEFAULT_HOT_LINKS } from '../merged-view/view-hot-state.js';
import type { QueueReader, Storage } from './storage.js';
import type { ConsumerRunOptions } from '../consumer/consumer-run-options.js';
import { PostgresLifecycleBackend } from '../lifecycle/postgres-lifecycle-backend.js';
import { PostgresSuppressionList } from '../lifecycle/postgres-lifecycle-store.js';

export class PostgresStorage implements Storage {
  readonly profile = 'postgres' as const;
  readonly location: string;
  readonly #url: string;
  readonly #env: Environment;
  readonly #dataDir: string;
  readonly #pool: Pool;
  #limitsPool: Pool | null = null;
  #queuePool: Pool | null = null;
  #suppressionPool: Pool | null = null;
  #control: ControlPlane | null = null;
  #view: PostgresViewStore | null = null;
  #lifecycle: PostgresLifecycleBackend | null = null;
  readonly #closables: { close(): Promise<void> | void }[] = [];

  readonly #masterKeyFile: string | undefined;

  constructor(url: string, dataDir: string, env: Environment, options: { poolSize?: number; masterKeyFile?: string | undefined } = {}) {
    this.#masterKeyFile = options.masterKeyFile;
    this.#url = url;
    this.#env = env;
    this.#dataDir = dataDir;
    this.#pool = createPool(url, env, { max: options.poolSize ?? 6 });
    this.location = `PostgreSQL ${redactUrl(url)} (schema ecapi_${env})`;
  }

  /** The queue's acknowledgement is only as durable as the server's settings make a COMMIT. */
  async durabilityWarning(): Promise<string | null> {
    return durabilityWarning(this.#pool);
  }

  controlPlane(): ControlPlane {
    // Loaded and checked against the fingerprint in the database when a secret is first sealed or
    // opened: every node must use the same master key.
    return (this.#control ??= new ControlPlaneService(
      new PostgresControlStore(this.#pool, { name: `PostgreSQL schema ecapi_${this.#env}` }),
      masterKeyLoader({ dataDir: this.#dataDir, keyFile: this.#masterKeyFile }),
    ));
  }

  openQueue(observer?: QueueCommitObserver): EventQueue {
    // Its own pool: a commit never waits for a connection behind other work of the process, and a
    // commit blocked on a lock fails after lock_timeout (500, readiness false) instead of hanging,
    // like the SQLite queue's busy timeout.
    this.#queuePool ??= createPool(this.#url, this.#env, {
      max: 2,
      settings: { lock_timeout: '5s', statement_timeout: '30s' },
      applicationName: 'ecapi-ingest queue',
    });
    const queue = new PostgresEventQueue(this.#queuePool, observer);
    this.#closables.push(queue);
    return queue;
  }

  queueReader(): QueueReader {
    return {
      read: (options) => readSegments(this.#pool, options),
      lag: async (nowMs) => partitionedLag(this.#pool, await this.viewStore().offsets(`${VIEW_CONSUMER}/`), nowMs),
      acceptedCounts: (dataSetId, sinceHourMs) => acceptedCounts(this.#pool, dataSetId, sinceHourMs),
    };
  }

  viewStore(): PostgresViewStore {
    return (this.#view ??= new PostgresViewStore(this.#pool));
  }

  ingestStats(): IngestStatsStore {
    return new PostgresIngestStatsStore(this.#pool);
  }

  clusterRateLimiter(options: { onError?: (error: Error) => void; onRecovered?: () => void } = {}): RateLimiter {
    // Its own small pool: a lease refill never waits behind a queue commit, and its commits need
    // no fsync (the table is UNLOGGED; synchronous_commit=off for these sessions).
    this.#limitsPool ??= createPool(this.#url, this.#env, { max: 4, settings: { synchronous_commit: 'off' }, applicationName: 'ecapi-ingest limits' });
    const limiter = new LeasedRateLimiter(new PostgresLeaseChannel(this.#limitsPool, options));
    this.#closables.push(limiter);
    return limiter;
  }

  lifecycle(): PostgresLifecycleBackend {
    return (this.#lifecycle ??= new PostgresLifecycleBackend(this.#pool));
  }

  runConsumer(options: ConsumerRunOptions): Promise<void> {
    // The consumer's store keeps its lanes' identifier links in memory (merged-view/postgres-hot-links.ts).
    return runPartitionedConsumer(this.#pool, this.viewStore().withHotLinks(options.viewHotLinks ?? DEFAULT_HOT_LINKS), {
      ...options,
      // A pool of its own: every batch reads the list inside its transaction (consumer/view-consumer.ts)
      // while it holds a connection of the main pool, so from the main pool lanes holding all its
      // connections would each wait for another one (until the connect timeout).
      suppressions: new PostgresSuppressionList((this.#suppressionPool ??= createPool(this.#url, this.#env, { max: 1, applicationName: 'ecapi-ingest suppressions' }))),
      workerId: `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`,
      env: this.#env,
    });
  }

  #closed = false;

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const c of this.#closables.splice(0)) await c.close();
    await this.#lifecycle?.close(); // its held claims check out pool connections
    // Give-backs of closed rate limiters are in flight on the limits pool: let them finish.
    await new Promise((resolve) => setTimeout(resolve, this.#limitsPool ? 50 : 0));
    await this.#limitsPool?.end();
    await this.#queuePool?.end();
    await this.#suppressionPool?.end();
    await this.#pool.end();
    this.#limitsPool = this.#queuePool = this.#suppressionPool = null;
  }
}
