/**
 * The disk, visible before it is full: bytes per store and free bytes on the data dir's file system
 * as Prometheus gauges (computed on scrape, cached a few seconds), a warning in the log when free
 * space falls under a threshold (again every 10 minutes while it stays low), and the same figures
 * for the console (overview: free space and stores; data set page: its records and their bytes).
 *
 * Threshold: ECAPI_LOW_SPACE_PERCENT (default 10) percent of the file system. On the PostgreSQL
 * profile the free bytes are those of the node's data dir, not of the database server's disk (watch
 * that with the database's own monitoring); store bytes are the database's tables.
 */
import { statfs } from 'node:fs/promises';
import { Gauge, type Registry } from 'prom-client';
import type { Logger } from '../observability/logger.js';
import { FailureLatch } from '../model/failure-latch.js';
import type { LifecycleBackend, StoreBytes } from './lifecycle-backend.js';

export interface DiskUsage {
  readonly free_bytes: number;
  readonly total_bytes: number;
  readonly low_space_percent: number;
  readonly low: boolean;
  readonly stores: StoreBytes;
}

const CACHE_MS = 5_000;
const DATA_SET_CACHE_MS = 60_000;
/** Often enough that a disk filling at ingest's full rate is warned about before it is full (issue 29). */
const CHECK_EVERY_MS = 5_000;
const WARN_AGAIN_MS = 10 * 60_000;

export function lowSpacePercent(env: NodeJS.ProcessEnv = process.env): number {
  const value = Number(env.ECAPI_LOW_SPACE_PERCENT ?? 10);
  return Number.isFinite(value) && value >= 0 && value <= 100 ? value : 10;
}

export class DiskMonitor {
  readonly #dataDir: string;
  readonly #backend: LifecycleBackend;
  readonly #logger: Logger;
  readonly #percent: number;
  #cached: { at: number; value: Promise<DiskUsage> } | null = null;
  readonly #dataSets = new Map<string, { at: number; value: Promise<{ records: number; event_bytes: number }> }>();
  #timer: NodeJS.Timeout | null = null;
  #warnedAt = Number.NEGATIVE_INFINITY;

  constructor(options: { dataDir: string; backend: LifecycleBackend; logger: Logger; lowSpacePercent?: number }) {
    this.#dataDir = options.dataDir;
    this.#backend = options.backend;
    this.#logger = options.logger;
    this.#percent = options.lowSpacePercent ?? lowSpacePercent();
  }

  usage(nowMs = Date.now()): Promise<DiskUsage> {
    if (this.#cached && nowMs - this.#cached.at < CACHE_MS) return this.#cached.value;
    const value = (async () => {
      const [fs, stores] = await Promise.all([statfs(this.#dataDir), this.#backend.storeBytes()]);
      const free = fs.bavail * fs.bsize;
      const total = fs.blocks * fs.bsize;
      return { free_bytes: free, total_bytes: total, low_space_percent: this.#percent, low: total > 0 && (free / total) * 100 < this.#percent, stores };
    })();
    this.#cached = { at: nowMs, value };
    value.catch(() => (this.#cached = null));
    return value;
  }

  /** Records of a data set in the view and the bytes of their events (cached a minute: it scans them). */
  dataSet(dataSetId: string, nowMs = Date.now()): Promise<{ records: number; event_bytes: number }> {
    const hit = this.#dataSets.get(dataSetId);
    if (hit && nowMs - hit.at < DATA_SET_CACHE_MS) return hit.value;
    const value = this.#backend.dataSetUsage(dataSetId);
    this.#dataSets.set(dataSetId, { at: nowMs, value });
    value.catch(() => this.#dataSets.delete(dataSetId));
    return value;
  }

  /** One check: logs a warning when free space is low (at most every 10 minutes). */
  async check(nowMs = Date.now()): Promise<DiskUsage> {
    const usage = await this.usage(nowMs);
    if (usage.low && nowMs - this.#warnedAt >= WARN_AGAIN_MS) {
      this.#warnedAt = nowMs;
      this.#logger.warn(
        { free_bytes: usage.free_bytes, total_bytes: usage.total_bytes, low_space_percent: usage.low_space_percent, stores: usage.stores },
        'low free space on the data dir: shorten --retention / --view-retention or add disk (docs/guides/data-lifecycle.md)',
      );
    } else if (!usage.low) this.#warnedAt = Number.NEGATIVE_INFINITY;
    return usage;
  }

  start(): void {
    // Said once per failing spell (the database's sizes unreadable during an outage), not per check.
    const latch = new FailureLatch(
      (error) => this.#logger.warn({ err: { message: error.message } }, 'disk usage check failed (said once until a check succeeds)'),
      () => this.#logger.info({}, 'disk usage check recovered'),
    );
    const run = () =>
      void this.check().then(
        () => latch.succeeded(),
        (error: Error) => latch.failed(error),
      );
    run();
    this.#timer = setInterval(run, CHECK_EVERY_MS);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }

  registerGauges(registry: Registry): void {
    const monitor = this;
    new Gauge({
      name: 'ecapi_storage_bytes',
      help: 'Bytes each store takes on disk (embedded: its files with WAL; PostgreSQL: its tables)',
      labelNames: ['store'],
      registers: [registry],
      aggregator: 'max',
      async collect() {
        const usage = await monitor.usage().catch(() => null);
        if (usage) for (const [store, bytes] of Object.entries(usage.stores)) this.set({ store }, bytes);
      },
    });
    new Gauge({
      name: 'ecapi_data_dir_free_bytes',
      help: "Bytes available to the service on the data dir's file system",
      registers: [registry],
      aggregator: 'max',
      async collect() {
        const usage = await monitor.usage().catch(() => null);
        if (usage) this.set(usage.free_bytes);
      },
    });
  }
}
