/**
 * Reading the embedded queue for the consumer and for lag figures: a read-only connection to
 * queue.db (WAL: it never blocks ingest commits, and each read sees everything committed so far).
 *
 * Each record is decoded once: a segment (one request, up to 1,000 events in one JSON text) is
 * parsed whole, and the records a batch did not take wait in memory for the next read, instead of
 * the segment being fetched and parsed again. A partition's source skips the segments of other
 * partitions' data sets without reading or parsing their events (the data set is a column), and
 * says how far it scanned, so the partition's offset moves past them.
 */
import type Database from 'better-sqlite3';
import { existsSync } from 'node:fs';
import type { QueueRecord } from '../queue/event-queue.js';
import { appendSegmentRecords } from '../queue/segment-records.js';
import { bodyLogDir } from '../queue/sqlite-body-log.js';
import { lastQueuedSeq, openQueueDatabase, receivedAtOfSeq, rowEvents, segmentColumns, type SegmentRow } from '../queue/sqlite-queue-store.js';
import type { QueueBatch, QueueSource } from './view-consumer.js';

export class SqliteQueueSource implements QueueSource {
  readonly #file: string;
  readonly #accept: ((dataSetId: string) => boolean) | null;
  readonly #acceptRecord: ((record: QueueRecord) => boolean) | null;
  #db: Database.Database | null = null;
  #segments: Database.Statement | null = null;
  /** Decoded records of the last segment read that the previous batch did not take. */
  #carry: QueueRecord[] = [];
  /** Where the segment of the carried records ends (past the records other shards keep). */
  #carryEnd = 0;

  /**
   * `accept`: the data sets of this source's partition (all when absent); `acceptRecord`: the
   * records of this source's record shard (merged-view/record-shard.ts; all when absent), the others skipped.
   */
  constructor(file: string, options: { accept?: (dataSetId: string) => boolean; acceptRecord?: (record: QueueRecord) => boolean } = {}) {
    this.#file = file;
    this.#accept = options.accept ?? null;
    this.#acceptRecord = options.acceptRecord ?? null;
  }

  /** The connection, opened once the queue file exists (a worker may start before the server). */
  #open(): Database.Database | null {
    if (this.#db) return this.#db;
    if (!existsSync(this.#file)) return null;
    this.#db = openQueueDatabase(this.#file, { readonly: true });
    return this.#db;
  }

  async read(fromSeq: number, limit: number): Promise<QueueRecord[]> {
    return (await this.readBatch(fromSeq, limit)).records;
  }

  async readBatch(fromSeq: number, limit: number): Promise<QueueBatch> {
    const records: QueueRecord[] = [];
    if (limit <= 0) return { records, nextSeq: fromSeq };
    let from = fromSeq;
    if (this.#carry.length > 0 && this.#carry[0]!.seq === fromSeq) {
      const taken = this.#carry.splice(0, limit);
      records.push(...taken);
      from = this.#carry.length > 0 ? this.#carry[0]!.seq : this.#carryEnd;
      if (records.length >= limit) return { records, nextSeq: from };
      this.#carry = [];
    } else this.#carry = [];

    const db = this.#open();
    if (!db) return { records, nextSeq: from };
    // The segment holding `from` starts at or before it; MAX over the primary key is an index probe.
    const start = (db.prepare('SELECT COALESCE(MAX(first_seq), 0) AS s FROM queue_segments WHERE first_seq <= ?').get(from) as { s: number }).s;
    const logDir = bodyLogDir(this.#file);
    let nextSeq = from;
    for (const row of this.#segmentsFrom(db).iterate(start) as IterableIterator<SegmentRow>) {
      const end = row.first_seq + row.event_count;
      if (end <= from) continue;
      if (this.#accept && !this.#accept(row.data_set_id)) {
        nextSeq = end;
        continue;
      }
      let decoded: QueueRecord[] = [];
      appendSegmentRecords(decoded, row, rowEvents(row, logDir), row.metas, from, Number.MAX_SAFE_INTEGER);
      if (this.#acceptRecord) decoded = decoded.filter(this.#acceptRecord);
      const room = limit - records.length;
      if (decoded.length > room) {
        for (let i = 0; i < room; i++) records.push(decoded[i]!);
        this.#carry = decoded.slice(room);
        this.#carryEnd = end;
        // The next read starts at the first record carried (the records between belong to other shards).
        nextSeq = this.#carry[0]!.seq;
        break; // leaving the loop closes the statement's iterator
      }
      for (const r of decoded) records.push(r);
      nextSeq = end;
      if (records.length === limit) break;
      // Bound the scan of skipped segments so that one read stays short.
      if (this.#accept && nextSeq - from > limit * 50 && records.length > 0) break;
    }
    return { records, nextSeq };
  }

  /** The segments statement: kept once it selects every column; a file no writer has migrated yet is asked again (sqlite-queue-store.ts `segmentColumns`). */
  #segmentsFrom(db: Database.Database): Database.Statement {
    if (this.#segments) return this.#segments;
    const columns = segmentColumns(db);
    const statement = db.prepare(`SELECT ${columns.sql} FROM queue_segments WHERE first_seq >= ? ORDER BY first_seq`);
    if (columns.complete) this.#segments = statement;
    return statement;
  }

  /** Last queued sequence number, and received_at of `seq` if it is queued. */
  position(seq: number): { lastSeq: number; receivedAt: number | null } {
    const db = this.#open();
    if (!db) return { lastSeq: 0, receivedAt: null };
    return { lastSeq: lastQueuedSeq(db), receivedAt: receivedAtOfSeq(db, seq) };
  }

  async close(): Promise<void> {
    this.#carry = [];
    this.#segments = null;
    this.#db?.close();
    this.#db = null;
  }
}
