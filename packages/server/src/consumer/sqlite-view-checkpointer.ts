/**
 * Checkpoints of the view's partition files, run from the consumer process's main thread, which is
 * otherwise idle while its partition threads apply batches. A checkpoint copies the WAL into the
 * database file and syncs it; done inside a partition's own commits it took a quarter of the
 * applier's time at a 1 GB view (bench/README.md, "The partitioned consumer"). PASSIVE never blocks the
 * writer: it copies what no reader still needs, and SQLite starts the WAL over once a checkpoint
 * has caught up with it. Each partition thread keeps an automatic checkpoint at a high threshold as
 * a safety net. On stop, a TRUNCATE leaves no WAL behind.
 */
import Database from 'better-sqlite3';
import { existsSync } from 'node:fs';

export class ViewCheckpointer {
  readonly #files: readonly string[];
  readonly #dbs = new Map<string, Database.Database>();
  readonly #timer: NodeJS.Timeout;

  /**
   * `everyMs`: 2 s. A page written again before the next checkpoint is copied once, and the view's
   * hot pages (identity nodes, the record index's tail, counters) are written by nearly every batch,
   * so rarer checkpoints copy less: 500 ms copied ~25% more per event. The WAL in between stays far
   * below the partition threads' 256 MB safety net at this machine's rates (~10,000 events/s per
   * thread × ~6 KB of WAL per event ≈ 120 MB per 2 s).
   */
  constructor(files: readonly string[], everyMs = 2000) {
    this.#files = files;
    this.#timer = setInterval(() => this.#run('PASSIVE'), everyMs);
    this.#timer.unref();
  }

  #run(mode: 'PASSIVE' | 'TRUNCATE'): void {
    for (const file of this.#files) {
      try {
        let db = this.#dbs.get(file);
        if (!db) {
          if (!existsSync(file)) continue; // its thread has not created it yet
          db = new Database(file, { fileMustExist: true });
          db.pragma('busy_timeout = 1000');
          this.#dbs.set(file, db);
        }
        db.pragma(`wal_checkpoint(${mode})`);
      } catch {
        // Busy or not ready: the next round, or the writer's own safety net, does it.
      }
    }
  }

  close(): void {
    clearInterval(this.#timer);
    this.#run('TRUNCATE');
    for (const db of this.#dbs.values()) db.close();
    this.#dbs.clear();
  }
}
