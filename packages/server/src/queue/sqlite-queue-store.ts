/**
 * The SQLite layout of the queue, shared by the writer thread and by readers.
 *
 * One row per accepted request ("segment"), not one per event: a 1,000-event request is one INSERT
 * of one JSON array. Events get consecutive sequence numbers [first_seq, first_seq + event_count).
 * This keeps the per-event cost of durability to a share of one B-tree insert and one WAL frame
 * run, which is what lets batched ingest reach the 100k events/s class on a small machine.
 */
import Database from 'better-sqlite3';
import { existsSync } from 'node:fs';
import { prepareDatabaseFile } from '../fs/durable-files.js';
import type { QueueRecord, ReadOptions } from './event-queue.js';
import { appendSegmentRecords, segmentEvents, segmentEventsOfText, type SegmentHeader } from './segment-records.js';
import { bodyLogDir, readLoggedBody } from './sqlite-body-log.js';

export const QUEUE_SCHEMA = `
CREATE TABLE IF NOT EXISTS queue_segments (
  first_seq INTEGER PRIMARY KEY,
  event_count INTEGER NOT NULL,
  received_at INTEGER NOT NULL,
  data_set_id TEXT NOT NULL,
  key_id TEXT NOT NULL,
  request_id TEXT NOT NULL,
  policy_version INTEGER NOT NULL,
  events TEXT NOT NULL,
  metas TEXT,
  merge_window_ms INTEGER
);
CREATE TABLE IF NOT EXISTS queue_log_head (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  file_no INTEGER NOT NULL,
  end_offset INTEGER NOT NULL
);
INSERT OR IGNORE INTO queue_log_head (id, file_no, end_offset) VALUES (1, 1, 0);
`;
// \`events\` holds either a JSON array of the accepted events (storage class TEXT), or, when a
// request's events were all accepted exactly as sent, the request body itself (storage class BLOB:
// a bare event or an {"events": [...]} wrapper). Declared affinity never converts a BLOB.
// A large request body lives in the body log instead (sqlite-body-log.ts): \`body_file\` is then
// set, \`events\` is an empty BLOB, and (body_file, body_offset, body_length) says where the bytes are.

export interface SegmentRow extends SegmentHeader {
  event_count: number;
  /** As text when selected by SEGMENT_COLUMNS (`events_is_body` then says which form); by `SELECT *`, as stored. */
  events: string | Buffer;
  /** 1: `events` is a request body (stored as a BLOB); 0: a JSON array of events. Absent from `SELECT *` rows. */
  events_is_body?: 0 | 1;
  metas: string | null;
  body_file?: number | null;
  body_offset?: number | null;
  body_length?: number | null;
}

/**
 * The columns a reader of segments selects, in place of `SELECT *`: the same, with `events` cast to
 * TEXT and its storage class beside it. better-sqlite3 hands a BLOB to JavaScript as a new Buffer, an
 * allocation that cost ~4 µs a row (a 1 KB single-event body: `SELECT *` 6.1-7.5 µs a row, this list
 * 2.3, text included); a consumer reads every segment once per partition, so single events paid it
 * on every partition thread (bench/README.md, issue 30, "Reading single-event segments"). The cast
 * reads the body's bytes as UTF-8 text, as `Buffer.toString('utf8')` did after the copy.
 */
const SEGMENT_COLUMNS = `first_seq, event_count, received_at, data_set_id, key_id, request_id, policy_version, merge_window_ms,
  CAST(events AS TEXT) AS events, typeof(events) = 'blob' AS events_is_body, metas, body_file, body_offset, body_length`;

/**
 * Nullable INTEGER columns of queue_segments that files made before them lack, added by a writer on
 * open (rows stored before keep NULL), a group at a time: the body log's (rows stored inline leave
 * them NULL), and the merge window each segment was accepted under (event-queue.ts
 * QueueAppend.mergeWindowMs; NULL: queued before the column).
 */
const ADDED_SEGMENT_COLUMNS: readonly (readonly string[])[] = [['body_file', 'body_offset', 'body_length'], ['merge_window_ms']];

const segmentColumnNames = (db: Database.Database): string[] => db.prepare('SELECT name FROM pragma_table_info(?)').pluck().all('queue_segments') as string[];

/**
 * What to select from queue_segments: SEGMENT_COLUMNS, or `*` in a file that lacks a column a writer
 * of this version adds on open (a read-only reader of an older file that no writer has opened yet;
 * `*` follows the columns once they are added). Columns are never dropped, so a caller keeps a
 * statement made from SEGMENT_COLUMNS and asks again while it got `*`.
 */
export function segmentColumns(db: Database.Database): { sql: string; complete: boolean } {
  const present = new Set(segmentColumnNames(db));
  const complete = ADDED_SEGMENT_COLUMNS.every((group) => group.every((column) => present.has(column)));
  return { sql: complete ? SEGMENT_COLUMNS : '*', complete };
}

/** The events of a row: inline, or read from the body log. */
export function rowEvents(row: SegmentRow, logDir: string): Record<string, unknown>[] {
  // NULL: stored inline; undefined: a file older than the body log, not yet opened by a writer.
  if (typeof row.body_file === 'number') return segmentEvents(readLoggedBody(logDir, { fileNo: row.body_file, offset: row.body_offset!, length: row.body_length! }));
  if (row.events_is_body !== undefined) return segmentEventsOfText(row.events as string, row.events_is_body === 1);
  return segmentEvents(row.events);
}

/** Adds one group of ADDED_SEGMENT_COLUMNS: they go together, and the first of them says whether they are there. */
function addSegmentColumns(db: Database.Database, columns: readonly string[]): void {
  const present = () => segmentColumnNames(db).includes(columns[0]!);
  if (present()) return;
  db.transaction(() => {
    if (present()) return; // another process added them while this one waited for the lock
    for (const column of columns) db.exec(`ALTER TABLE queue_segments ADD COLUMN ${column} INTEGER`);
  }).immediate();
}

/**
 * Accepted events per data set and UTC hour of arrival (`hour` = received_at of the hour's start),
 * added by the same commit that queues them (sqlite-queue-writer-thread.ts): the count of `stats`
 * is exactly what the queue holds, whatever happens to the process after the commit. Retention
 * deletes segments, never these counts. A file older than the table gets it filled from the
 * segments it still holds, once, in the transaction that creates it.
 */
export const ACCEPTED_COUNTS_SCHEMA = `
CREATE TABLE queue_accepted (
  data_set_id TEXT NOT NULL,
  hour INTEGER NOT NULL,
  n INTEGER NOT NULL,
  PRIMARY KEY (data_set_id, hour)
) WITHOUT ROWID;
INSERT INTO queue_accepted (data_set_id, hour, n)
  SELECT data_set_id, received_at - received_at % 3600000, SUM(event_count) FROM queue_segments GROUP BY 1, 2;
`;

/**
 * Segments queued before queues kept their merge window (merge_window_ms NULL), indexed so that
 * finding them costs nothing once there are none: the consumer gives them their data set's window
 * once, at its start (queue/sqlite-legacy-windows.ts). A writer of this version always stores a
 * window, so no row it stores enters the index. Built on open by the first writer of this version
 * (one scan of the table, in the transaction that creates it).
 */
export const UNSTAMPED_SEGMENTS_INDEX = 'queue_segments_unstamped';

function addUnstampedIndex(db: Database.Database): void {
  const present = () => db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?").get(UNSTAMPED_SEGMENTS_INDEX) !== undefined;
  if (present()) return;
  db.transaction(() => {
    if (present()) return; // another process created it while this one waited for the lock
    db.exec(`CREATE INDEX ${UNSTAMPED_SEGMENTS_INDEX} ON queue_segments (first_seq) WHERE merge_window_ms IS NULL`);
  }).immediate();
}

function hasAcceptedCounts(db: Database.Database): boolean {
  return db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'queue_accepted'").get() !== undefined;
}

function addAcceptedCounts(db: Database.Database): void {
  if (hasAcceptedCounts(db)) return;
  db.transaction(() => {
    if (hasAcceptedCounts(db)) return; // another process created it while this one waited for the lock
    db.exec(ACCEPTED_COUNTS_SCHEMA);
  }).immediate();
}

/**
 * Accepted-event counter rows (name `accepted`) of a data set from the hour `sinceHourMs` on, or
 * null when the file predates the counts (no writer has opened it since).
 */
export function acceptedCounts(db: Database.Database, dataSetId: string, sinceHourMs: number): { hour: number; name: string; n: number }[] | null {
  if (!hasAcceptedCounts(db)) return null;
  return db
    .prepare("SELECT hour, 'accepted' AS name, n FROM queue_accepted WHERE data_set_id = ? AND hour >= ? ORDER BY hour")
    .all(dataSetId, sinceHourMs) as { hour: number; name: string; n: number }[];
}

/** acceptedCounts over a read-only connection, opened once the queue file exists, kept open. */
export class SqliteAcceptedCounts {
  readonly #file: string;
  #db: Database.Database | null = null;

  constructor(file: string) {
    this.#file = file;
  }

  async read(dataSetId: string, sinceHourMs: number): Promise<{ hour: number; name: string; n: number }[] | null> {
    if (!this.#db) {
      if (!existsSync(this.#file)) return [];
      this.#db = openQueueDatabase(this.#file, { readonly: true });
    }
    return acceptedCounts(this.#db, dataSetId, sinceHourMs);
  }

  async close(): Promise<void> {
    this.#db?.close();
    this.#db = null;
  }
}

/** Where readers of this module used to find it; the shared code is in segment-records.ts. */
export { segmentEvents };

export function openQueueDatabase(file: string, options: { readonly?: boolean } = {}): Database.Database {
  // The directory entry chain must be durable before any commit in it is acknowledged (durable-files.ts).
  if (!options.readonly) prepareDatabaseFile(file);
  const db = new Database(file, { readonly: options.readonly ?? false, fileMustExist: options.readonly ?? false });
  // First: several processes (the workers of a node, the CLI, the consumer) open this file at the
  // same moment, and switching to WAL or creating the schema must wait for a lock, not fail.
  try {
    db.pragma('busy_timeout = 5000');
    if (!options.readonly) {
      db.pragma('journal_mode = WAL');
      // FULL: every commit syncs the WAL, so a committed segment survives power loss, not only a crash.
      db.pragma('synchronous = FULL');
      // Every writer (ingest, retention, the eraser) overwrites what it deletes or moves with zeros:
      // a row deleted by retention, a segment rewritten by an erasure, a cell moved by a page split
      // leave no old copy in free space (issue 29; cost measured in bench/README.md).
      db.pragma('secure_delete = ON');
      db.exec(QUEUE_SCHEMA);
      for (const columns of ADDED_SEGMENT_COLUMNS) addSegmentColumns(db, columns);
      addUnstampedIndex(db);
      addAcceptedCounts(db);
    }
  } catch (error) {
    db.close(); // e.g. "database is locked": the caller may try again, and leaks no connection
    throw error;
  }
  return db;
}

/**
 * Reads records from `fromSeq` on, expanding segments into one record per event. Steps through
 * segments one row at a time and stops as soon as `limit` records are collected, so a reader of a
 * few thousand records never fetches (and parses) large segments it will not use.
 */
export function readRecords(db: Database.Database, options: ReadOptions): QueueRecord[] {
  const records: QueueRecord[] = [];
  if (options.limit <= 0) return records;
  // The segment holding fromSeq starts at or before it; MAX over the primary key is an index probe.
  const start = db
    .prepare('SELECT COALESCE(MAX(first_seq), 0) AS s FROM queue_segments WHERE first_seq <= ?')
    .get(options.fromSeq) as { s: number };
  const columns = segmentColumns(db).sql;
  const rows = (
    options.dataSetId === undefined
      ? db.prepare(`SELECT ${columns} FROM queue_segments WHERE first_seq >= ? ORDER BY first_seq`).iterate(start.s)
      : db.prepare(`SELECT ${columns} FROM queue_segments WHERE first_seq >= ? AND data_set_id = ? ORDER BY first_seq`).iterate(start.s, options.dataSetId)
  ) as IterableIterator<SegmentRow>;
  const logDir = bodyLogDir(db.name);
  for (const row of rows) {
    // Leaving the loop early closes the statement's iterator (its `return` runs).
    if (appendSegmentRecords(records, row, rowEvents(row, logDir), row.metas, options.fromSeq, options.limit)) return records;
  }
  return records;
}

/** The last sequence number in the queue (0 when empty): one index probe, for consumer lag. */
export function lastQueuedSeq(db: Database.Database): number {
  const row = db.prepare('SELECT first_seq + event_count - 1 AS last FROM queue_segments ORDER BY first_seq DESC LIMIT 1').get() as
    | { last: number }
    | undefined;
  return row?.last ?? 0;
}

/** received_at (ms) of the record with sequence number `seq`, or null when it is not queued (yet). */
export function receivedAtOfSeq(db: Database.Database, seq: number): number | null {
  const row = db
    .prepare('SELECT first_seq, event_count, received_at FROM queue_segments WHERE first_seq <= ? ORDER BY first_seq DESC LIMIT 1')
    .get(seq) as { first_seq: number; event_count: number; received_at: number } | undefined;
  if (!row || seq >= row.first_seq + row.event_count) return null;
  return row.received_at;
}

/** readRecords over all data sets; the consumer's name for it. */
export function readRecordsIncremental(db: Database.Database, fromSeq: number, limit: number): QueueRecord[] {
  return readRecords(db, { fromSeq, limit });
}
