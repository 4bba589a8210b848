/**
 * The embedded profile's lifecycle backend: lifecycle.db, an eraser per view file (its own
 * connection beside the file's consumer thread, sqlite-view-eraser.ts; in the sharded layout a data
 * set's eraser spans the record shards and its identity part, sharded-view-eraser.ts), and queue.db.
 */
import Database from 'better-sqlite3';
import { existsSync, readdirSync, statSync, type Dirent } from 'node:fs';
import { statfs } from 'node:fs/promises';
import { join } from 'node:path';
import { environmentDir, queueDbFile, viewDbFile, type Environment } from '../config.js';
import { partitionAmong } from '../model/data-set-partition.js';
import { recordedViewLayout, viewLayoutFiles, type ViewLayout } from '../merged-view/sqlite-view-layout.js';
import { ShardedViewEraser } from './sharded-view-eraser.js';
import type { LifecycleBackend, StoreBytes, ViewEraser } from './lifecycle-backend.js';
import { lifecycleDbFile, SqliteLifecycleStore } from './sqlite-lifecycle-store.js';
import { SqliteQueueEraser } from './sqlite-queue-eraser.js';
import { SqliteViewEraser } from './sqlite-view-eraser.js';
import { openQueueDatabase, receivedAtOfSeq } from '../queue/sqlite-queue-store.js';

/** Which store a file of the environment directory belongs to (with its -wal and -shm). */
const STORE_OF_FILE: readonly [RegExp, keyof StoreBytes][] = [
  [/^queue\.db(-wal|-shm)?$/, 'queue'],
  [/^view(-[ps]\d+)?\.db(-wal|-shm)?$/, 'view'],
  [/^control\.db(-wal|-shm)?$/, 'control'],
  [/^lifecycle\.db(-wal|-shm)?$/, 'lifecycle'],
  [/^ingest-stats\.db(-wal|-shm)?$/, 'ingest_stats'],
];

/** Allocated bytes of a file (0 when it went away meanwhile). */
function fileBytes(path: string): number {
  try {
    return statSync(path).blocks * 512;
  } catch {
    return 0;
  }
}

export class SqliteLifecycleBackend implements LifecycleBackend {
  readonly #dataDir: string;
  readonly #env: Environment;
  #store: SqliteLifecycleStore | null = null;
  #queue: SqliteQueueEraser | null = null;
  #erasers: (SqliteViewEraser | ShardedViewEraser)[] | null = null;
  /** Every view file's eraser (data-set partitions, or identity parts and record shards). */
  #files: SqliteViewEraser[] = [];
  /** A read-only connection to queue.db for appliedThrough (opened on first use). */
  #queueReader: Database.Database | null = null;

  constructor(dataDir: string, env: Environment) {
    this.#dataDir = dataDir;
    this.#env = env;
  }

  get store(): SqliteLifecycleStore {
    return (this.#store ??= new SqliteLifecycleStore(lifecycleDbFile(environmentDir(this.#dataDir, this.#env))));
  }

  get queue(): SqliteQueueEraser {
    return (this.#queue ??= new SqliteQueueEraser(queueDbFile(this.#dataDir, this.#env)));
  }

  /**
   * The erasers, once the view's layout is recorded (null before): one per data-set partition, or
   * in the sharded layout one per identity part, each with every record shard (sharded-view-eraser.ts).
   */
  #viewErasers(): (SqliteViewEraser | ShardedViewEraser)[] | null {
    if (this.#erasers) return this.#erasers;
    const file = viewDbFile(this.#dataDir, this.#env);
    if (!existsSync(file)) return null;
    const db = new Database(file, { readonly: true, fileMustExist: true });
    let layout: ViewLayout | null;
    try {
      db.pragma('busy_timeout = 5000');
      layout = recordedViewLayout(db);
    } finally {
      db.close();
    }
    if (layout === null) return null;
    const { identityParts, shards } = viewLayoutFiles(file, layout);
    this.#files = [...identityParts, ...shards].map((f) => new SqliteViewEraser(f));
    const parts = this.#files.slice(0, identityParts.length);
    const shardErasers = this.#files.slice(identityParts.length);
    this.#erasers = layout.kind === 'sharded' ? parts.map((part) => new ShardedViewEraser(shardErasers, part)) : parts;
    return this.#erasers;
  }

  #eraserOf(dataSetId: string): SqliteViewEraser | ShardedViewEraser | null {
    const erasers = this.#viewErasers();
    return erasers ? erasers[partitionAmong(dataSetId, erasers.length)]! : null;
  }

  async viewEraser(dataSetId: string): Promise<ViewEraser | null> {
    return this.#eraserOf(dataSetId);
  }

  async releaseStaleHolds(pending: ReadonlySet<number>): Promise<void> {
    if (this.#viewErasers() === null) return;
    for (const file of this.#files) {
      const fence = file.fence();
      if (fence !== null && !pending.has(fence.holder)) file.releaseFence();
    }
  }

  /** The data set's partition moves its offset past every segment, its own or skipped. */
  async applied(dataSetId: string, boundSeq: number): Promise<boolean> {
    const eraser = this.#eraserOf(dataSetId);
    return eraser !== null && eraser.offset() > boundSeq;
  }

  /** The partition's offset is the next sequence number it applies: the first record it has not. */
  async appliedThrough(dataSetId: string, nowMs: number): Promise<number> {
    const eraser = this.#eraserOf(dataSetId);
    if (eraser === null) return nowMs; // no view yet: nothing to expire
    this.#queueReader ??= openQueueDatabase(queueDbFile(this.#dataDir, this.#env), { readonly: true });
    const receivedAt = receivedAtOfSeq(this.#queueReader, eraser.offset());
    return receivedAt === null ? nowMs : Math.min(nowMs, receivedAt);
  }

  async storeBytes(): Promise<StoreBytes> {
    const envDir = environmentDir(this.#dataDir, this.#env);
    const sizes = { queue: 0, body_log: 0, view: 0, control: 0, lifecycle: 0, ingest_stats: 0 };
    let entries: Dirent[];
    try {
      entries = readdirSync(envDir, { withFileTypes: true });
    } catch {
      return sizes;
    }
    for (const entry of entries) {
      const path = join(envDir, entry.name);
      if (entry.isDirectory()) {
        if (entry.name.startsWith('queue.db-bodies')) for (const f of readdirSync(path)) sizes.body_log += fileBytes(join(path, f));
        continue;
      }
      const store = STORE_OF_FILE.find(([pattern]) => pattern.test(entry.name))?.[1];
      if (store) sizes[store] += fileBytes(path);
    }
    return sizes;
  }

  async freeBytes(): Promise<number | null> {
    try {
      const fs = await statfs(environmentDir(this.#dataDir, this.#env));
      return fs.bavail * fs.bsize;
    } catch {
      return null;
    }
  }

  async dataSetUsage(dataSetId: string): Promise<{ records: number; event_bytes: number }> {
    return this.#eraserOf(dataSetId)?.usage(dataSetId) ?? { records: 0, event_bytes: 0 };
  }

  async close(): Promise<void> {
    for (const e of this.#files) e.close();
    this.#files = [];
    this.#queue?.close();
    this.#queueReader?.close();
    this.#queueReader = null;
    await this.#store?.close();
    this.#erasers = this.#queue = this.#store = null;
  }
}
