/**
 * Reading the embedded queue for the consumer and for lag figures: a read-only connection to
 * queue.db (WAL: it never blocks ingest commits, and each read sees everything committed so far).
 */
import type Database from 'better-sqlite3';
import { existsSync } from 'node:fs';
import type { QueueRecord } from '../queue/event-queue.js';
import { lastQueuedSeq, openQueueDatabase, readRecordsIncremental, receivedAtOfSeq } from '../queue/sqlite-queue-store.js';
import type { QueueSource } from './view-consumer.js';

export class SqliteQueueSource implements QueueSource {
  readonly #file: string;
  #db: Database.Database | null = null;

  constructor(file: string) {
    this.#file = file;
  }

  /** The connection, opened once the queue file exists (a worker may start before the server). */
  #open(): Database.Database | null {
    if (this.#db) return this.#db;
    if (!existsSync(this.#file)) return null;
    this.#db = openQueueDatabase(this.#file, { readonly: true });
    return this.#db;
  }

  async read(fromSeq: number, limit: number): Promise<QueueRecord[]> {
    const db = this.#open();
    return db ? readRecordsIncremental(db, fromSeq, limit) : [];
  }

  /** Last queued sequence number, and received_at of `seq` if it is queued. */
  position(seq: number): { lastSeq: number; receivedAt: number | null } {
    const db = this.#open();
    if (!db) return { lastSeq: 0, receivedAt: null };
    return { lastSeq: lastQueuedSeq(db), receivedAt: receivedAtOfSeq(db, seq) };
  }

  async close(): Promise<void> {
    this.#db?.close();
    this.#db = null;
  }
}

export interface ConsumerLag {
  /** Next sequence number the consumer will apply. */
  readonly next_seq: number;
  /** Last sequence number in the queue (0 when empty). */
  readonly queue_last_seq: number;
  /** Records queued but not yet applied. */
  readonly lag_records: number;
  /** Age of the oldest record not yet applied (0 when caught up). */
  readonly lag_seconds: number;
}

export function lagOf(nextSeq: number, queue: { lastSeq: number; receivedAt: number | null }, nowMs: number): ConsumerLag {
  const lagRecords = Math.max(0, queue.lastSeq - nextSeq + 1);
  const lagSeconds = lagRecords > 0 && queue.receivedAt !== null ? Math.max(0, (nowMs - queue.receivedAt) / 1000) : 0;
  return { next_seq: nextSeq, queue_last_seq: queue.lastSeq, lag_records: lagRecords, lag_seconds: Math.round(lagSeconds * 1000) / 1000 };
}
