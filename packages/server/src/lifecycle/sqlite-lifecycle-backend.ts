/**
 * The embedded profile's lifecycle backend: lifecycle.db, an eraser per view partition file (its
 * own connection beside the partition's consumer thread, sqlite-view-eraser.ts), and queue.db.
 */
import Database from 'better-sqlite3';
import { existsSync } from 'node:fs';
import { environmentDir, queueDbFile, viewDbFile, type Environment } from '../config.js';
import { partitionOf } from '../consumer/data-set-partition.js';
import { recordedViewPartitions, viewPartitionFile } from '../merged-view/sqlite-view-layout.js';
import type { LifecycleBackend, ViewEraser } from './lifecycle-backend.js';
import { lifecycleDbFile, SqliteLifecycleStore } from './sqlite-lifecycle-store.js';
import { SqliteQueueEraser } from './sqlite-queue-eraser.js';
import { SqliteViewEraser } from './sqlite-view-eraser.js';

export class SqliteLifecycleBackend implements LifecycleBackend {
  readonly #dataDir: string;
  readonly #env: Environment;
  #store: SqliteLifecycleStore | null = null;
  #queue: SqliteQueueEraser | null = null;
  #erasers: SqliteViewEraser[] | null = null;

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

  /** The partitions' erasers, once the view's layout is recorded (null before). */
  #viewErasers(): SqliteViewEraser[] | null {
    if (this.#erasers) return this.#erasers;
    const file = viewDbFile(this.#dataDir, this.#env);
    if (!existsSync(file)) return null;
    const db = new Database(file, { readonly: true, fileMustExist: true });
    let n: number | null;
    try {
      db.pragma('busy_timeout = 5000');
      n = recordedViewPartitions(db);
    } finally {
      db.close();
    }
    if (n === null) return null;
    this.#erasers = Array.from({ length: n }, (_, i) => new SqliteViewEraser(viewPartitionFile(file, i)));
    return this.#erasers;
  }

  #eraserOf(dataSetId: string): SqliteViewEraser | null {
    const erasers = this.#viewErasers();
    return erasers ? erasers[partitionOf(dataSetId, erasers.length)]! : null;
  }

  async viewEraser(dataSetId: string): Promise<ViewEraser | null> {
    return this.#eraserOf(dataSetId);
  }

  /** The data set's partition moves its offset past every segment, its own or skipped. */
  async applied(dataSetId: string, boundSeq: number): Promise<boolean> {
    const eraser = this.#eraserOf(dataSetId);
    return eraser !== null && eraser.offset() > boundSeq;
  }

  async close(): Promise<void> {
    for (const e of this.#erasers ?? []) e.close();
    this.#queue?.close();
    await this.#store?.close();
    this.#erasers = this.#queue = this.#store = null;
  }
}
