/**
 * Deletions in one embedded view partition file (retention, a person's data, one event), each a
 * short transaction of at most `limit` rows on a connection of its own.
 *
 * Who writes: the worker's lifecycle runner (lifecycle-runner.ts), in the worker process, next to
 * the partition's consumer thread. SQLite serializes the two writers; a consumer batch waits for at
 * most one of these transactions (a few hundred rows: milliseconds), and these wait for a batch.
 * This is safe because the consumer loads what a batch touches inside its own write transaction
 * (view-applier.ts): it keeps no view state across batches. A cache of records or identities kept
 * across batches would have to be invalidated by these deletions.
 *
 * Identities: a record's identity is the root of its identity_key (trees are flat). Deleting a
 * record takes one from its root's event_count; an identity whose count reaches zero goes with
 * every node it absorbed and all their identifier links. Counters (hourly statistics) are
 * aggregates without identifiers and stay.
 */
import Database from 'better-sqlite3';
import { VIEW_CONSUMER } from '../consumer/view-consumer.js';
import { zeroCounts, type ErasedCounts, type IdentityToErase, type ViewEraser } from './lifecycle-backend.js';

interface RecordIdentityRow {
  rowid: number;
  record_key: string;
  identity_key: string | null;
}

export class SqliteViewEraser implements ViewEraser {
  readonly #db: Database.Database;
  readonly #s;

  constructor(viewFile: string) {
    this.#db = new Database(viewFile, { fileMustExist: true });
    this.#db.pragma('busy_timeout = 5000');
    // As the consumer's connection: retention that a power loss rolls back runs again next round.
    // Deletions of a person's data sync their commit (#durably), since the request is then marked done.
    this.#db.pragma('synchronous = NORMAL');
    // Checkpoints are the worker main thread's (consumer/view-checkpointer.ts), never inside a deletion's commit.
    this.#db.pragma('wal_autocheckpoint = 65536');
    // Deleted rows are overwritten with zeros where that costs no extra I/O; the rest of their pages
    // is reused by later inserts (the file does not grow while retention frees as much as comes in).
    this.#db.pragma('secure_delete = FAST');
    // Retention reads records by data set and age; the consumer maintains this index from now on.
    this.#db.exec('CREATE INDEX IF NOT EXISTS view_records_expiry ON view_records (data_set_id, last_received_at)');
    const db = this.#db;
    this.#s = {
      expired: db.prepare(
        'SELECT rowid, record_key, identity_key FROM view_records INDEXED BY view_records_expiry WHERE data_set_id = ? AND last_received_at < ? LIMIT ?',
      ),
      recordByKey: db.prepare('SELECT rowid, record_key, identity_key FROM view_records WHERE data_set_id = ? AND record_key = ?'),
      deleteRecord: db.prepare('DELETE FROM view_records WHERE rowid = ?'),
      // The key too: a rowid read outside the transaction could have been reused meanwhile.
      deleteRecordOf: db.prepare('DELETE FROM view_records WHERE rowid = ? AND data_set_id = ? AND record_key = ?'),
      node: db.prepare('SELECT identity_key, parent, event_count FROM identity_nodes WHERE data_set_id = ? AND identity_key = ?'),
      decrement: db.prepare('UPDATE identity_nodes SET event_count = event_count - 1 WHERE data_set_id = ? AND identity_key = ? RETURNING event_count').pluck(),
      members: db.prepare('SELECT identity_key FROM identity_nodes INDEXED BY identity_nodes_parent WHERE data_set_id = ? AND parent = ?').pluck(),
      deleteNode: db.prepare('DELETE FROM identity_nodes WHERE data_set_id = ? AND identity_key = ?'),
      deleteLinks: db.prepare('DELETE FROM identity_identifiers WHERE data_set_id = ? AND identity_key = ?'),
      linksOf: db.prepare('SELECT identifier FROM identity_identifiers WHERE data_set_id = ? AND identity_key = ?').pluck(),
      linkOf: db.prepare('SELECT identity_key FROM identity_identifiers WHERE data_set_id = ? AND identifier = ?').pluck(),
      usage: db.prepare('SELECT count(*) AS records, sum(length(event)) AS event_bytes FROM view_records WHERE data_set_id = ?'),
      offset: db.prepare('SELECT next_seq FROM consumer_offsets WHERE consumer = ?').pluck(),
      recordPage: db.prepare('SELECT rowid, record_key, identity_key FROM view_records WHERE rowid > ? AND data_set_id = ? ORDER BY rowid LIMIT ?'),
    };
  }

  /** Records of the data set and the bytes of their events (reads every record of the data set). */
  usage(dataSetId: string): { records: number; event_bytes: number } {
    const row = this.#s.usage.get(dataSetId) as { records: number; event_bytes: number | null };
    return { records: row.records, event_bytes: row.event_bytes ?? 0 };
  }

  /** The partition's consumer offset (next sequence number it applies; 1 before the first batch). */
  offset(): number {
    return (this.#s.offset.get(VIEW_CONSUMER) as number | undefined) ?? 1;
  }

  /**
   * Runs `work` with synchronous=FULL (its commits are on disk before the request is marked done) and
   * secure_delete=ON (every deleted byte is overwritten, not only where that costs no extra I/O).
   */
  #durably<T>(work: () => T): T {
    this.#db.pragma('synchronous = FULL');
    this.#db.pragma('secure_delete = ON');
    try {
      return work();
    } finally {
      this.#db.pragma('synchronous = NORMAL');
      this.#db.pragma('secure_delete = FAST');
    }
  }

  #rootOf(dataSetId: string, key: string): string | null {
    const node = this.#s.node.get(dataSetId, key) as { identity_key: string; parent: string | null } | undefined;
    return node ? (node.parent ?? node.identity_key) : null;
  }

  /** The identity (root and absorbed keys) and its identifiers, or null when unknown. */
  async findIdentity(dataSetId: string, target: { identifier: string } | { identityKey: string }): Promise<IdentityToErase | null> {
    const start = 'identifier' in target ? (this.#s.linkOf.get(dataSetId, target.identifier) as string | undefined) : target.identityKey;
    if (start === undefined) return null;
    const root = this.#rootOf(dataSetId, start);
    if (root === null) return null;
    const keys = [root, ...(this.#s.members.all(dataSetId, root) as string[])];
    const identifiers = keys.flatMap((k) => this.#s.linksOf.all(dataSetId, k) as string[]).sort();
    return { root, keys, identifiers };
  }

  /** Deletes the identity tree of `root`: its nodes and their links (one transaction). */
  #dropIdentity(dataSetId: string, root: string, counts: ErasedCounts): void {
    for (const key of [root, ...(this.#s.members.all(dataSetId, root) as string[])]) {
      counts.links += this.#s.deleteLinks.run(dataSetId, key).changes;
      counts.identities += this.#s.deleteNode.run(dataSetId, key).changes;
    }
  }

  /** Deletes one record and accounts for it in its identity (inside a transaction). */
  #dropRecord(dataSetId: string, row: RecordIdentityRow, counts: ErasedCounts): void {
    counts.records += this.#s.deleteRecord.run(row.rowid).changes;
    if (row.identity_key === null) return;
    const root = this.#rootOf(dataSetId, row.identity_key);
    if (root === null) return;
    const left = this.#s.decrement.get(dataSetId, root) as number | undefined;
    if (left !== undefined && left <= 0) this.#dropIdentity(dataSetId, root, counts);
  }

  async expire(dataSetId: string, cutoffMs: number, limit: number): Promise<ErasedCounts & { heldMs: number }> {
    const counts = zeroCounts();
    let locked = 0;
    this.#db.transaction(() => {
      locked = performance.now(); // BEGIN IMMEDIATE has the write lock now
      for (const row of this.#s.expired.all(dataSetId, cutoffMs, limit) as RecordIdentityRow[]) this.#dropRecord(dataSetId, row, counts);
    }).immediate();
    return { ...counts, heldMs: performance.now() - locked };
  }

  async deleteRecord(dataSetId: string, recordKey: string): Promise<ErasedCounts> {
    const counts = zeroCounts();
    this.#durably(() =>
      this.#db.transaction(() => {
        const row = this.#s.recordByKey.get(dataSetId, recordKey) as RecordIdentityRow | undefined;
        if (row) this.#dropRecord(dataSetId, row, counts);
      }).immediate(),
    );
    return counts;
  }

  /** The cursor is a rowid: a scan in rowid order, so that no index is needed on the consumer's path. */
  async deleteIdentityRecords(dataSetId: string, keys: ReadonlySet<string>, afterRowid: number, limit: number): Promise<{ counts: ErasedCounts; next: number | null; deletedEventIds: string[] }> {
    const counts = zeroCounts();
    // The page is read without the write lock; only the deletes take it. A record that changed
    // identity meanwhile is still one of the identity's (its keys only grow by absorbing others).
    const rows = this.#s.recordPage.all(afterRowid, dataSetId, limit) as RecordIdentityRow[];
    const doomed = rows.filter((row) => row.identity_key !== null && keys.has(row.identity_key));
    if (doomed.length > 0) {
      this.#durably(() =>
        this.#db.transaction(() => {
          for (const row of doomed) counts.records += this.#s.deleteRecordOf.run(row.rowid, dataSetId, row.record_key).changes;
        }).immediate(),
      );
    }
    const deletedEventIds = doomed.filter((row) => row.record_key.startsWith('id:')).map((row) => row.record_key.slice(3));
    return { counts, next: rows.length < limit ? null : rows[rows.length - 1]!.rowid, deletedEventIds };
  }

  async deleteIdentity(dataSetId: string, root: string): Promise<ErasedCounts> {
    const counts = zeroCounts();
    this.#durably(() => this.#db.transaction(() => this.#dropIdentity(dataSetId, root, counts)).immediate());
    return counts;
  }

  close(): void {
    if (this.#db.open) this.#db.close();
  }
}
