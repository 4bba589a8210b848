/**
 * A queue file as the first versions made it: queue_segments without the columns later writers add
 * on open (body_file, body_offset, body_length, merge_window_ms) and no queue_accepted table. Tests
 * of upgrades and of readers that open such a file before any writer of this version has.
 */
import Database from 'better-sqlite3';

/** Creates `file` in that layout (WAL, as every version opened it) and returns it open, for the test to fill and close. */
export function createLegacyQueueFile(file: string): Database.Database {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.exec(`CREATE TABLE queue_segments (first_seq INTEGER PRIMARY KEY, event_count INTEGER NOT NULL, received_at INTEGER NOT NULL,
    data_set_id TEXT NOT NULL, key_id TEXT NOT NULL, request_id TEXT NOT NULL, policy_version INTEGER NOT NULL, events TEXT NOT NULL, metas TEXT)`);
  return db;
}
