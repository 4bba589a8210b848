/**
 * Retention of the embedded queue: segments the merged-view consumer has applied and that are
 * older than the retention are deleted, then the body-log files no remaining row points into.
 * Run by the consumer (consumer/sqlite-consumer.ts), the only process that knows what was applied.
 *
 * Rules:
 * - A segment goes only when ALL its events are below the consumer's offset (first_seq +
 *   event_count <= next seq to apply) and it was received before now - retention.
 * - The newest segment is never deleted, even when consumed and old: ingest takes the next
 *   sequence number from the last row, and an empty table would start over at 1, below the
 *   consumer's offset (those events would never be applied).
 * - Rows go in batches of BATCH_ROWS per DELETE, each its own short transaction: ingest writers
 *   wait for at most one batch (they poll the lock, sqlite-queue-writer-thread.ts).
 * - Body-log files: a file below the lowest file any row still points into, and below the file
 *   being written (queue_log_head), is garbage. It is unlinked one round LATER than the round that
 *   found it unreferenced: a reader (queue export, a consumer) that read a row just before its
 *   deletion still finds its file for a whole round.
 * - Erasure (issue 29): deleted rows are zeroed in the file (secure_delete=ON on every queue
 *   connection, sqlite-queue-store.ts), and after a round that deleted any, `clearOldCopies` copies
 *   the WAL back and cuts it to zero bytes, and at most every `oldCopiesEveryMs` (default 15 min,
 *   fs/old-copies-schedule.ts) zeroes what page rebuilds left of moved cells (fs/old-copies.ts): no
 *   copy of a deleted segment is left in queue.db or its -wal within that time of its round.
 */
import type Database from 'better-sqlite3';
import { readdirSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { bodyLogDir } from './sqlite-body-log.js';
import { openQueueDatabase } from './sqlite-queue-store.js';
import { clearOldCopies } from '../fs/old-copies.js';
import { OldCopiesSchedule } from '../fs/old-copies-schedule.js';

const BATCH_ROWS = 5_000;

export interface RetentionRound {
  readonly segmentsDeleted: number;
  readonly filesDeleted: number;
}

export class SqliteQueueRetention {
  readonly #file: string;
  #db: Database.Database | null = null;
  /** Body-log files below this number were unreferenced in the previous round: they go now. */
  #unreferencedBelow = 0;
  /** Segments were deleted since the WAL was last truncated. */
  #walDirty = false;
  /** When the pages' unallocated space is scrubbed of what the deletions left (not at every round). */
  readonly #scrubs: OldCopiesSchedule;

  constructor(queueFile: string, options: { readonly oldCopiesEveryMs?: number } = {}) {
    this.#file = queueFile;
    this.#scrubs = new OldCopiesSchedule(options.oldCopiesEveryMs);
  }

  /** One round. `nextSeq`: the consumer's offset (next sequence number it will apply). */
  run(nextSeq: number, retentionMs: number, nowMs = Date.now()): RetentionRound {
    const db = (this.#db ??= openQueueDatabase(this.#file));
    const cutoff = nowMs - retentionMs;
    const remove = db.prepare(
      `DELETE FROM queue_segments WHERE first_seq IN (
         SELECT first_seq FROM queue_segments
          WHERE first_seq + event_count <= ? AND received_at < ?
            AND first_seq < (SELECT MAX(first_seq) FROM queue_segments)
          ORDER BY first_seq LIMIT ${BATCH_ROWS})`,
    );
    let segmentsDeleted = 0;
    for (;;) {
      const { changes } = remove.run(nextSeq, cutoff);
      segmentsDeleted += changes;
      if (changes < BATCH_ROWS) break;
    }
    if (segmentsDeleted > 0) {
      this.#walDirty = true;
      this.#scrubs.deleted();
    }
    const filesDeleted = this.#deleteFiles(this.#unreferencedBelow);
    const lowest = db.prepare('SELECT MIN(body_file) AS f FROM queue_segments WHERE body_file IS NOT NULL').get() as { f: number | null };
    const head = db.prepare('SELECT file_no AS f FROM queue_log_head WHERE id = 1').get() as { f: number } | undefined;
    this.#unreferencedBelow = Math.min(lowest.f ?? Number.MAX_SAFE_INTEGER, head?.f ?? 0);
    return { segmentsDeleted, filesDeleted };
  }

  /**
   * After rounds that deleted segments: no old copy of them left in queue.db's WAL, and, when the
   * schedule says so, in its pages. Call it every round: it does nothing when nothing was deleted
   * since it last succeeded (false: busy, next round).
   */
  async clearOldCopies(nowMs = Date.now()): Promise<boolean> {
    if (!this.#db) return true;
    const scrub = this.#scrubs.due(nowMs);
    if (!this.#walDirty && !scrub) return true;
    const done = await clearOldCopies(this.#db, { attempts: 10, scrub });
    if (scrub) this.#scrubs.tried(nowMs, done);
    if (done) this.#walDirty = false;
    return done;
  }

  #deleteFiles(below: number): number {
    if (below <= 1) return 0;
    const dir = bodyLogDir(this.#file);
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return 0; // no body log yet
    }
    let deleted = 0;
    for (const name of names) {
      const match = /^(\d+)\.log$/.exec(name);
      if (!match || Number(match[1]) >= below) continue;
      try {
        unlinkSync(join(dir, name));
        deleted++;
      } catch {
        // already gone (another round, an operator): nothing to do
      }
    }
    return deleted;
  }

  close(): void {
    this.#db?.close();
    this.#db = null;
  }
}
