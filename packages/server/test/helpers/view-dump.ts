/**
 * The whole state of a view.db (merged records, identities, counters, offset) as one comparable
 * value, ordered by primary key. Heartbeats (wall-clock liveness) are left out.
 */
import Database from 'better-sqlite3';
import type { QueueRecord } from '../../src/queue/event-queue.js';
import type { QueueSource } from '../../src/consumer/view-consumer.js';

export function dumpView(file: string): Record<string, unknown[]> {
  const db = new Database(file, { readonly: true });
  try {
    return {
      view_records: db.prepare('SELECT * FROM view_records ORDER BY data_set_id, record_key').all(),
      identity_nodes: db.prepare('SELECT * FROM identity_nodes ORDER BY data_set_id, identity_key').all(),
      identity_identifiers: db.prepare('SELECT * FROM identity_identifiers ORDER BY data_set_id, identifier').all(),
      view_counters: db.prepare('SELECT * FROM view_counters ORDER BY data_set_id, hour, name').all(),
      consumer_offsets: db.prepare('SELECT * FROM consumer_offsets ORDER BY consumer').all(),
    };
  } finally {
    db.close();
  }
}

/** A queue held in memory, for consumer tests that need no queue file. */
export class ArrayQueueSource implements QueueSource {
  readonly records: QueueRecord[] = [];
  push(record: Omit<QueueRecord, 'seq' | 'key_id' | 'request_id' | 'policy_version'> & { seq?: number }): QueueRecord {
    const full: QueueRecord = {
      key_id: 'key_test',
      request_id: 'req',
      policy_version: 1,
      ...record,
      seq: record.seq ?? this.records.length + 1,
    };
    this.records.push(full);
    return full;
  }
  async read(fromSeq: number, limit: number): Promise<QueueRecord[]> {
    return this.records.filter((r) => r.seq >= fromSeq).slice(0, limit);
  }
  async close(): Promise<void> {}
}
