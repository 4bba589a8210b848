/**
 * Erases events from the embedded queue's segments in place: an erased event becomes `null` in
 * its segment's JSON array, so sequence numbers of the other events of the request stay what they
 * were, and every reader skips it (segment-records.ts appendSegmentRecords).
 *
 * Rules:
 * - A page of segments is read and decoded with no lock held; each segment that changed is then
 *   rewritten in a write transaction of its own, so an ingest writer (which polls the lock) waits
 *   for one UPDATE at most, never for the decoding.
 * - A segment whose body is in the body log is rewritten inline (a JSON array with the erased
 *   events null) and its row no longer points into the log. The log's bytes of that body are then
 *   overwritten with zeros and synced, one runner tick LATER (`overwritePending`), so that a reader
 *   that fetched the row just before the rewrite still reads intact bytes. The bytes are gone from
 *   the file when the overwrite is synced (seconds), not at the next queue retention.
 * - Only this process's erasures rewrite segments; ingest appends new ones, retention deletes old
 *   ones (an UPDATE of a segment retention deleted meanwhile changes nothing).
 */
import type Database from 'better-sqlite3';
import { closeSync, fdatasyncSync, openSync, writeSync } from 'node:fs';
import { segmentEvents } from '../queue/segment-records.js';
import { bodyLogDir, bodyLogFile } from '../queue/sqlite-body-log.js';
import { openQueueDatabase, rowEvents, type SegmentRow } from '../queue/sqlite-queue-store.js';
import { eraseMatching, type QueueEraser } from './lifecycle-backend.js';

interface LoggedBytes {
  readonly fileNo: number;
  readonly offset: number;
  readonly length: number;
}

export class SqliteQueueEraser implements QueueEraser {
  readonly #file: string;
  #db: Database.Database | null = null;
  /** Body-log ranges no row points to any more, overwritten at the next `overwritePending`. */
  #toOverwrite: LoggedBytes[] = [];
  #ready: LoggedBytes[] = [];

  constructor(queueFile: string) {
    this.#file = queueFile;
  }

  #open(): Database.Database {
    if (this.#db) return this.#db;
    this.#db = openQueueDatabase(this.#file);
    // The old text of a rewritten segment is overwritten with zeros in the file, not left in free space.
    this.#db.pragma('secure_delete = ON');
    return this.#db;
  }

  async erase(
    dataSetId: string,
    boundSeq: number,
    afterSeq: number,
    limit: number,
    match: (event: Record<string, unknown>) => boolean,
  ): Promise<{ events: number; next: number | null }> {
    const db = this.#open();
    const rows = db
      .prepare('SELECT * FROM queue_segments WHERE first_seq > ? AND first_seq <= ? AND data_set_id = ? ORDER BY first_seq LIMIT ?')
      .all(afterSeq, boundSeq, dataSetId, limit) as SegmentRow[];
    const logDir = bodyLogDir(this.#file);
    const updates: { firstSeq: number; events: string; logged: LoggedBytes | null }[] = [];
    let erased = 0;
    for (const row of rows) {
      const events = segmentEvents(rowEvents(row, logDir)) as (Record<string, unknown> | null)[];
      const changed = eraseMatching(events, match);
      if (changed === 0) continue;
      erased += changed;
      const logged = typeof row.body_file === 'number' ? { fileNo: row.body_file, offset: row.body_offset!, length: row.body_length! } : null;
      updates.push({ firstSeq: row.first_seq, events: JSON.stringify(events), logged });
    }
    if (updates.length > 0) {
      const update = db.prepare('UPDATE queue_segments SET events = ?, body_file = NULL, body_offset = NULL, body_length = NULL WHERE first_seq = ?');
      // One segment per transaction (a rewritten body can be ~1 MB): an ingest commit waits for one UPDATE at most.
      for (const u of updates) {
        db.transaction(() => update.run(u.events, u.firstSeq)).immediate();
        if (u.logged) this.#toOverwrite.push(u.logged);
      }
    }
    return { events: erased, next: rows.length < limit ? null : rows[rows.length - 1]!.first_seq };
  }

  /** Overwrites with zeros (and syncs) the body-log bytes found unreferenced one call earlier. */
  async overwritePending(): Promise<number> {
    const due = this.#ready;
    this.#ready = this.#toOverwrite;
    this.#toOverwrite = [];
    let bytes = 0;
    const logDir = bodyLogDir(this.#file);
    for (const range of due) {
      let fd: number;
      try {
        fd = openSync(bodyLogFile(logDir, range.fileNo), 'r+');
      } catch {
        continue; // already unlinked by queue retention: the bytes are gone with the file
      }
      try {
        writeSync(fd, Buffer.alloc(range.length), 0, range.length, range.offset);
        fdatasyncSync(fd);
        bytes += range.length;
      } finally {
        closeSync(fd);
      }
    }
    return bytes;
  }

  close(): void {
    this.#db?.close();
    this.#db = null;
  }
}
