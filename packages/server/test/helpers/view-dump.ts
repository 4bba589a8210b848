/**
 * The whole state of a view.db (merged records, identities, counters, offset) as one comparable
 * value, ordered by primary key, in either layout (data-set partitions or the sharded layout's
 * record shards and identity parts). Heartbeats (wall-clock liveness) are left out.
 */
import assert from 'node:assert/strict';
import Database from 'better-sqlite3';
import { basename } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import type { QueueRecord } from '../../src/queue/event-queue.js';
import type { QueueSource } from '../../src/consumer/view-consumer.js';
import { viewLayoutFiles, viewPartitionFile, type ViewLayout } from '../../src/merged-view/sqlite-view-layout.js';

/**
 * One view file's tables, ordered by primary key. `rowids`: the merged records' rowids too (they are
 * `events export`'s order, so two files built by one consumer must agree on them).
 */
export function dumpFile(file: string, options: { rowids?: boolean; recordIdentities?: boolean } = {}): Record<string, unknown[]> {
  const db = new Database(file, { readonly: true });
  try {
    return {
      view_records: db.prepare(`SELECT ${options.rowids ? 'rowid, ' : ''}* FROM view_records ORDER BY data_set_id, record_key`).all(),
      identity_nodes: db.prepare('SELECT * FROM identity_nodes ORDER BY data_set_id, identity_key').all(),
      identity_identifiers: db.prepare('SELECT * FROM identity_identifiers ORDER BY data_set_id, identifier').all(),
      // The sharded layout's identity parts (consumer/identity-stage-applier.ts): each record's identity key.
      ...(options.recordIdentities ? { record_identities: db.prepare('SELECT * FROM record_identities ORDER BY data_set_id, record_key').all() } : {}),
      view_counters: db.prepare('SELECT * FROM view_counters ORDER BY data_set_id, hour, name').all(),
      consumer_offsets: db.prepare('SELECT * FROM consumer_offsets ORDER BY consumer').all(),
    };
  } finally {
    db.close();
  }
}

/**
 * The view's layout as recorded in view.db (merged-view/sqlite-view-layout.ts): its partition count
 * (1 for a view without a layout) and its kind ('data-sets' unless `view_sharding` says sharded).
 */
export function viewLayoutOf(file: string): ViewLayout {
  const db = new Database(file, { readonly: true });
  try {
    const has = (table: string) => db.prepare('SELECT 1 FROM sqlite_master WHERE name = ?').get(table) !== undefined;
    const partitions = has('view_layout') ? ((db.prepare('SELECT partitions FROM view_layout').pluck().get() as number | undefined) ?? 1) : 1;
    const sharded = has('view_sharding') && db.prepare('SELECT sharded FROM view_sharding').pluck().get() === 1;
    return { partitions, kind: sharded ? 'sharded' : 'data-sets' };
  } finally {
    db.close();
  }
}

/** Every file of the view of `file` (view.db), as its recorded layout names them: identity parts (or data-set partitions), then shards. */
export function viewFilesOf(file: string): { identityParts: string[]; shards: string[] } {
  return viewLayoutFiles(file, viewLayoutOf(file));
}

/** The lifecycle fences left in the view's files (merged-view/view-fence.ts), by file name: none once no deletion holds the parts. */
export function viewFences(file: string): { file: string; up_to_seq: number; holder: number }[] {
  const { identityParts, shards } = viewFilesOf(file);
  const fences: { file: string; up_to_seq: number; holder: number }[] = [];
  for (const part of [...identityParts, ...shards]) {
    const db = new Database(part, { readonly: true });
    try {
      if (db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'view_fence'").get() === undefined) continue;
      for (const row of db.prepare('SELECT up_to_seq, holder FROM view_fence').all() as { up_to_seq: number; holder: number }[]) {
        fences.push({ file: basename(part), ...row });
      }
    } finally {
      db.close();
    }
  }
  return fences;
}

/**
 * Every file of the view, table by table as it is stored (with `record_identities`), keyed by file
 * name: two views of the same layout and partition count that hold the same state compare equal.
 */
export function dumpViewFiles(file: string): Record<string, Record<string, unknown[]>> {
  const { identityParts, shards } = viewFilesOf(file);
  return Object.fromEntries([...identityParts, ...shards].map((part) => [basename(part), dumpFile(part, { recordIdentities: true })]));
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
 * A sharded view (view_sharding) is read through its shards and identity parts (dumpShardedView),
 * so that it compares equal with a data-set partitioned view of the same state.
 */
export function dumpView(file: string): Record<string, unknown[]> {
  if (viewLayoutOf(file).kind === 'sharded') return dumpShardedView(file);
  const parts = viewPartitionsOf(file);
  const dumps = Array.from({ length: parts }, (_, p) => dumpFile(viewPartitionFile(file, p)));
  const merged = (table: string, keys: string[]) => dumps.flatMap((d) => d[table]! as Record<string, unknown>[]).sort(byKey(keys));
  return {
    view_records: merged('view_records', ['data_set_id', 'record_key']),
    identity_nodes: merged('identity_nodes', ['data_set_id', 'identity_key']),
    identity_identifiers: merged('identity_identifiers', ['data_set_id', 'identifier']),
    view_counters: merged('view_counters', ['data_set_id', 'hour', 'name']),
    consumer_offsets: dumps.flatMap((d, partition) => (d.consumer_offsets as Record<string, unknown>[]).map((row) => ({ partition, ...row }))),
  };
}

type Row = Record<string, unknown>;

const byKey = (keys: string[]) => (a: Row, b: Row) => {
  for (const k of keys) {
    const x = a[k] as string | number;
    const y = b[k] as string | number;
    if (x < y) return -1;
    if (x > y) return 1;
  }
  return 0;
};

/**
 * A sharded view (consumer/identity-stage-applier.ts) as the same value `dumpView` gives for a view
 * partitioned by data set holding the same state, so that the two layouts compare equal:
 * - view_records: the shards' rows, each with the identity key its identity part's
 *   `record_identities` row gives it (the shard's own `identity_key` stays NULL). A record without
 *   an identity row, an identity row without a record, or the two disagreeing on first_received_at
 *   shows in the rows (an `orphan` row, a marker in place of the key, a `record_identities_first_received_at`
 *   field), so that it never compares equal to a consistent view;
 * - identity_nodes, identity_identifiers: the rows of every file (the identity parts hold them);
 * - view_counters: summed over the files (each shard counts its own records);
 * - consumer_offsets: one row per file, `partition` for an identity part, `shard` for a record shard.
 */
function dumpShardedView(file: string): Record<string, unknown[]> {
  const { identityParts, shards } = viewFilesOf(file);
  const identityDumps = identityParts.map((part) => dumpFile(part, { recordIdentities: true }));
  const shardDumps = shards.map((part) => dumpFile(part, { recordIdentities: true }));
  const all = [...identityDumps, ...shardDumps];
  const rows = (dumps: Record<string, unknown[]>[], table: string) => dumps.flatMap((d) => d[table]! as Row[]);
  const pk = (row: Row) => `${row.data_set_id as string}\u0000${row.record_key as string}`;
  const identities = new Map(rows(all, 'record_identities').map((row) => [pk(row), row]));
  const records: Row[] = rows(all, 'view_records').map((record) => {
    const identity = identities.get(pk(record));
    identities.delete(pk(record));
    if (!identity) return { ...record, identity_key: '<no record_identities row>' };
    if (identity.first_received_at !== record.first_received_at) return { ...record, identity_key: identity.identity_key, record_identities_first_received_at: identity.first_received_at };
    return { ...record, identity_key: identity.identity_key };
  });
  for (const orphan of identities.values()) records.push({ ...orphan, orphan: 'a record_identities row without a record' });
  const counters = new Map<string, Row>();
  for (const row of rows(all, 'view_counters')) {
    const key = `${row.data_set_id as string}\u0000${row.hour as number}\u0000${row.name as string}`;
    const sum = counters.get(key);
    if (sum) sum.n = (sum.n as number) + (row.n as number);
    else counters.set(key, { ...row });
  }
  return {
    view_records: records.sort(byKey(['data_set_id', 'record_key'])),
    identity_nodes: rows(all, 'identity_nodes').sort(byKey(['data_set_id', 'identity_key'])),
    identity_identifiers: rows(all, 'identity_identifiers').sort(byKey(['data_set_id', 'identifier'])),
    view_counters: [...counters.values()].sort(byKey(['data_set_id', 'hour', 'name'])),
    consumer_offsets: [
      ...identityDumps.flatMap((d, partition) => (d.consumer_offsets as Row[]).map((row) => ({ partition, ...row }))),
      ...shardDumps.flatMap((d, shard) => (d.consumer_offsets as Row[]).map((row) => ({ shard, ...row }))),
    ],
  };
}

/**
 * Two dumps (dumpView, dumpFile) equal table by table, row by row; on a difference the message
 * names the table, how many rows differ and the first of them, not a diff of every row (which,
 * for tens of thousands of rows, takes more memory than a test process has).
 */
export function assertSameTables(actual: Record<string, unknown[]>, expected: Record<string, unknown[]>, what: string, options: { except?: readonly string[] } = {}): void {
  const tables = [...new Set([...Object.keys(expected), ...Object.keys(actual)])].filter((table) => !options.except?.includes(table));
  for (const table of tables) {
    const a = actual[table] ?? [];
    const e = expected[table] ?? [];
    const differing: number[] = [];
    for (let i = 0; i < Math.max(a.length, e.length); i++) if (!isDeepStrictEqual(a[i], e[i])) differing.push(i);
    if (differing.length === 0) continue;
    const i = differing[0]!;
    assert.fail(
      `${what}: ${table}: ${a.length} rows, expected ${e.length}; ${differing.length} positions differ, the first, row ${i}:\n` +
        `  actual:   ${JSON.stringify(a[i]) ?? '(none)'}\n  expected: ${JSON.stringify(e[i]) ?? '(none)'}`,
    );
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
