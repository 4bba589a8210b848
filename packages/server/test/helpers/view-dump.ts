/**
 * The whole state of a view.db (merged records, identities, counters, offset) as one comparable
 * value, ordered by primary key. Heartbeats (wall-clock liveness) are left out.
 */
import Database from 'better-sqlite3';
import type { QueueRecord } from '../../src/queue/event-queue.js';
import type { QueueSource } from '../../src/consumer/view-consumer.js';
import { viewPartitionFile } from '../../src/merged-view/sqlite-view-layout.js';

/**
 * One view file's tables, ordered by primary key. `rowids`: the merged records' rowids too (they are
 * `events export`'s order, so two files built by one consumer must agree on them).
 */
export function dumpFile(file: string, options: { rowids?: boolean } = {}): Record<string, unknown[]> {
  const db = new Database(file, { readonly: true });
  try {
    return {
      view_records: db.prepare(`SELECT ${options.rowids ? 'rowid, ' : ''}* FROM view_records ORDER BY data_set_id, record_key`).all(),
      identity_nodes: db.prepare('SELECT * FROM identity_nodes ORDER BY data_set_id, identity_key').all(),
      identity_identifiers: db.prepare('SELECT * FROM identity_identifiers ORDER BY data_set_id, identifier').all(),
      view_counters: db.prepare('SELECT * FROM view_counters ORDER BY data_set_id, hour, name').all(),
      consumer_offsets: db.prepare('SELECT * FROM consumer_offsets ORDER BY consumer').all(),
    };
  } finally {
    db.close();
  }
}

/** The view's partition count as recorded in view.db (1 for a view without a layout). */
export function viewPartitionsOf(file: string): number {
  const db = new Database(file, { readonly: true });
  try {
    const hasTable = db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'view_layout'").get() !== undefined;
    return hasTable ? ((db.prepare('SELECT partitions FROM view_layout').pluck().get() as number | undefined) ?? 1) : 1;
  } finally {
    db.close();
  }
}

/**
 * The view of `file` (view.db) and its partition files together: the rows of every partition,
 * ordered by primary key, so that views with different partition counts compare equal when they
 * hold the same state. `consumer_offsets` keeps one row per partition (with its partition number).
 */
export function dumpView(file: string): Record<string, unknown[]> {
  const parts = viewPartitionsOf(file);
  const dumps = Array.from({ length: parts }, (_, p) => dumpFile(viewPartitionFile(file, p)));
  const byKey = (keys: string[]) => (a: Record<string, unknown>, b: Record<string, unknown>) => {
    for (const k of keys) {
      const x = a[k] as string | number;
      const y = b[k] as string | number;
      if (x < y) return -1;
      if (x > y) return 1;
    }
    return 0;
  };
  const merged = (table: string, keys: string[]) => dumps.flatMap((d) => d[table]! as Record<string, unknown>[]).sort(byKey(keys));
  return {
    view_records: merged('view_records', ['data_set_id', 'record_key']),
    identity_nodes: merged('identity_nodes', ['data_set_id', 'identity_key']),
    identity_identifiers: merged('identity_identifiers', ['data_set_id', 'identifier']),
    view_counters: merged('view_counters', ['data_set_id', 'hour', 'name']),
    consumer_offsets: dumps.flatMap((d, partition) => (d.consumer_offsets as Record<string, unknown>[]).map((row) => ({ partition, ...row }))),
  };
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
