/**
 * Erases events from the embedded queue's segments in place: an erased event becomes `null` in
 * its segment's JSON array, so sequence numbers of the other events of the request stay what they
 * were, and every reader skips it (segment-records.ts appendSegmentRecords). Its entry in the
 * segment's `metas` (the policy's per-event notes: a redacted path names a property key the sender
 * chose, which can be an email address) becomes null by the same UPDATE (lifecycle-backend.ts
 * eraseMetasOf).
 *
 * Rules:
 * - A page of segments is read and decoded with no lock held; each segment that changed is then
 *   rewritten in a write transaction of its own, so an ingest writer (which polls the lock) waits
 *   for one UPDATE at most, never for the decoding.
 * - A segment whose body is in the body log is rewritten inline (a JSON array with the erased
 *   events null) and its row no longer points into the log; the same transaction records the log
 *   range in `queue_body_erasures`, so the overwrite survives a SIGKILL (issue 29: it was only held
 *   in memory). The range is overwritten with zeros and fdatasync'ed OVERWRITE_GRACE_MS later
 *   (`overwritePending`), so that a reader that fetched the row just before the rewrite still reads
 *   intact bytes, and before the request is marked done (the runner waits for it).
 * - Counts: `queue_erasures` holds each request's erased events, updated by the transaction that
 *   erases them, so the count is exact across a worker killed mid-way and the one that takes over.
 * - secure_delete=ON on every queue connection (sqlite-queue-store.ts): the old text of a
 *   rewritten segment is zeroed; `clearOldCopies` then zeroes what page rebuilds left of old cells and
 *   copies the WAL back and cuts it to zero bytes (fs/old-copies.ts).
 * - Only this process's erasures rewrite segments; ingest appends new ones, retention deletes old
 *   ones (an UPDATE of a segment retention deleted meanwhile changes nothing).
 */
import type Database from 'better-sqlite3';
import { closeSync, fdatasyncSync, openSync, writeSync } from 'node:fs';
import { bodyLogDir, bodyLogFile } from '../queue/sqlite-body-log.js';
import { openQueueDatabase, rowEvents, segmentColumns, type SegmentRow } from '../queue/sqlite-queue-store.js';
import { eraseMatchingEvents, eraseMetasOf, type QueueEraser } from './lifecycle-backend.js';
import { clearOldCopies } from '../fs/old-copies.js';

/** How long a body-log range stays intact after its row stopped pointing to it (readers mid-read). */
export const OVERWRITE_GRACE_MS = 1000;

const ERASURE_SCHEMA = `
CREATE TABLE IF NOT EXISTS queue_erasures (
  request_id INTEGER PRIMARY KEY,
  events INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS queue_body_erasures (
  file_no INTEGER NOT NULL,
  byte_offset INTEGER NOT NULL,
  byte_length INTEGER NOT NULL,
  erased_at INTEGER NOT NULL,
  PRIMARY KEY (file_no, byte_offset)
);`;

interface LoggedBytes {
  readonly file_no: number;
  readonly offset: number;
  readonly length: number;
  readonly erased_at: number;
}

export class SqliteQueueEraser implements QueueEraser {
  readonly #file: string;
  #db: Database.Database | null = null;

  constructor(queueFile: string) {
    this.#file = queueFile;
  }

  #open(): Database.Database {
    if (this.#db) return this.#db;
    this.#db = openQueueDatabase(this.#file); // secure_delete = ON there, for every queue writer
    this.#db.exec(ERASURE_SCHEMA);
    return this.#db;
  }

  async erase(
    requestId: number,
    dataSetId: string,
    upToSeq: number,
    afterSeq: number,
    limit: number,
    match: (event: Record<string, unknown>, seq: number) => boolean,
  ): Promise<{ next: number | null }> {
    const db = this.#open();
    const rows = db
      .prepare(`SELECT ${segmentColumns(db).sql} FROM queue_segments WHERE first_seq > ? AND first_seq <= ? AND data_set_id = ? ORDER BY first_seq LIMIT ?`)
      .all(afterSeq, upToSeq, dataSetId, limit) as SegmentRow[];
    const logDir = bodyLogDir(this.#file);
    const update = db.prepare('UPDATE queue_segments SET events = ?, metas = ?, body_file = NULL, body_offset = NULL, body_length = NULL WHERE first_seq = ? AND data_set_id = ?');
    const updateMetas = db.prepare('UPDATE queue_segments SET metas = ? WHERE first_seq = ? AND data_set_id = ?');
    const remember = db.prepare('INSERT OR IGNORE INTO queue_body_erasures (file_no, byte_offset, byte_length, erased_at) VALUES (?, ?, ?, ?)');
    const count = db.prepare('INSERT INTO queue_erasures (request_id, events) VALUES (?, ?) ON CONFLICT (request_id) DO UPDATE SET events = events + excluded.events');
    for (const row of rows) {
      const events = rowEvents(row, logDir) as (Record<string, unknown> | null)[];
      const changed = eraseMatchingEvents(events, row.first_seq, match);
      const metas = eraseMetasOf(row.metas, events);
      if (changed === 0) {
        // Nothing erased now, but metas of events erased before they went with them (an older version): cleaned.
        if (metas !== undefined) db.transaction(() => updateMetas.run(metas, row.first_seq, dataSetId)).immediate();
        continue;
      }
      const text = JSON.stringify(events);
      // One segment per transaction (a rewritten body can be ~1 MB): an ingest commit waits for one
      // UPDATE at most. The count and the body-log range are recorded by the same commit.
      db.transaction(() => {
        if (update.run(text, metas === undefined ? row.metas : metas, row.first_seq, dataSetId).changes === 0) return; // deleted by retention meanwhile
        count.run(requestId, changed);
        if (typeof row.body_file === 'number') remember.run(row.body_file, row.body_offset!, row.body_length!, Date.now());
      }).immediate();
    }
    return { next: rows.length < limit ? null : rows[rows.length - 1]!.first_seq };
  }

  async tally(requestId: number): Promise<number> {
    return (this.#open().prepare('SELECT events FROM queue_erasures WHERE request_id = ?').pluck().get(requestId) as number | undefined) ?? 0;
  }

  async clearTally(requestId: number): Promise<void> {
    this.#open().prepare('DELETE FROM queue_erasures WHERE request_id = ?').run(requestId);
  }

  /**
   * Overwrites with zeros (and fdatasyncs) the recorded body-log ranges no row points to, once
   * OVERWRITE_GRACE_MS old; with `wait`, waits for those not old enough yet. Each range's record
   * goes only after its bytes are synced (a SIGKILL in between overwrites them again: idempotent).
   */
  async overwritePending(options: { wait?: boolean } = {}): Promise<number> {
    const db = this.#open();
    let bytes = 0;
    for (;;) {
      const now = Date.now();
      const ranges = db.prepare('SELECT file_no, byte_offset AS offset, byte_length AS length, erased_at FROM queue_body_erasures ORDER BY erased_at').all() as LoggedBytes[];
      const due = ranges.filter((r) => r.erased_at <= now - OVERWRITE_GRACE_MS);
      const forget = db.prepare('DELETE FROM queue_body_erasures WHERE file_no = ? AND byte_offset = ?');
      const logDir = bodyLogDir(this.#file);
      for (const range of due) {
        // Recorded by the commit that made its only row stop pointing to it: nothing reads it any more.
        {
          let fd: number | null = null;
          try {
            fd = openSync(bodyLogFile(logDir, range.file_no), 'r+');
          } catch {
            // already unlinked by queue retention: the bytes are gone with the file
          }
          if (fd !== null) {
            try {
              writeSync(fd, Buffer.alloc(range.length), 0, range.length, range.offset);
              fdatasyncSync(fd);
              bytes += range.length;
            } finally {
              closeSync(fd);
            }
          }
        }
        forget.run(range.file_no, range.offset);
      }
      const waiting = ranges.length - due.length;
      if (!options.wait || waiting === 0) return bytes;
      await new Promise((r) => setTimeout(r, Math.max(10, ranges[due.length]!.erased_at + OVERWRITE_GRACE_MS - Date.now())));
    }
  }

  async clearOldCopies(): Promise<boolean> {
    return clearOldCopies(this.#open());
  }

  close(): void {
    this.#db?.close();
    this.#db = null;
  }
}
