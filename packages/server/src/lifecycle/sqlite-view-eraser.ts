/**
 * Deletions in one embedded view partition file (retention, a person's data, one event), each a
 * short transaction of at most `limit` rows on a connection of its own.
 *
 * Who writes: the worker's lifecycle runner (lifecycle-runner.ts), in the worker process, next to
 * the partition's consumer thread. SQLite serializes the two writers; a consumer batch waits for at
 * most one of these transactions (a few hundred rows: milliseconds), and these wait for a batch.
 * The consumer loads what a batch touches inside its own write transaction (view-applier.ts), and
 * keeps identifier links in memory across batches (merged-view/view-hot-state.ts): every
 * transaction here that deletes or changes something bumps the file's generation
 * (merged-view/view-generation.ts), and the consumer drops what it holds when it moved.
 *
 * Identities: a record's identity is the root of its identity_key (trees are flat). Deleting a
 * record takes one from its root's event_count; an identity whose count reaches zero goes with
 * every node it absorbed and all their identifier links. `events delete` of a record whose identity
 * keeps others also drops the links only that record carried: its identifiers linked to the identity
 * that none of the identity's remaining records carries, and the identity's links of replaceable
 * kinds (`cid:`, `ifa:`: lifecycle-backend.ts isReplaceableIdentifier) that none carries, which an
 * earlier version of the record may have brought before a re-send replaced it (read in the same transaction: there is no
 * index from an identity to its records, so this reads the data set's records of the file once,
 * under the write lock; a person's deletion and retention drop whole identities and need no such
 * read). Counters (hourly statistics) are aggregates without identifiers and stay.
 *
 * Erasure (issue 29): every connection that writes a view file runs with secure_delete=ON
 * (sqlite-view-store.ts, and this one), so deleted cells and freed pages are zeroed in the file; a
 * request's deletions are counted in `lifecycle_erasures` of the same file, in the transaction that
 * deletes (so the count is exact whatever attempt a SIGKILL interrupted); `clearOldCopies` then
 * zeroes what page rebuilds left of moved cells, copies the WAL back and cuts it to zero bytes
 * (fs/old-copies.ts), so no old copy of a deleted record is left in the file or its -wal.
 * A request covers records whose first event was queued up to its bound (README, data lifecycle):
 * each deleted record with an event id is named in the tally row with the last position merged into
 * it, so that its queued copies are erased too (a later re-send merged into it, a "straddler",
 * included); the row is deleted (and the old copies cleared) before the request is done.
 */
import Database from 'better-sqlite3';
import { VIEW_CONSUMER } from '../model/consumer-offsets.js';
import { VIEW_JOURNAL_SIZE_LIMIT } from '../merged-view/sqlite-view-store.js';
import { erasedRecordEntry, erasedRecordOf, identifiersOfStoredEvent, isReplaceableIdentifier, zeroCounts, type ErasedCounts, type IdentityToErase, type OldCopiesOptions, type ViewEraser, type ViewTally } from './lifecycle-backend.js';
import { checkpointPassive } from '../fs/wal-truncation.js';
import { clearOldCopies } from '../fs/old-copies.js';
import { GENERATION_SCHEMA, generationStatements } from '../merged-view/view-generation.js';
import { FENCE_SCHEMA, fenceStatements, type FenceStatements } from '../merged-view/view-fence.js';
import {
  identifierOfStored,
  identityKeyOfStored,
  migrateIdentifierLinks,
  storedIdentifier,
  storedIdentityKey,
  type StoredIdentifier,
  type StoredIdentityKey,
} from '../merged-view/identifier-link-columns.js';

export interface RecordIdentityRow {
  rowid: number;
  record_key: string;
  identity_key: string | null;
  first_seq: number;
}

/** Per-request counts of what was deleted, in the view file itself (one transaction with the deletes). */
const TALLY_SCHEMA = `
CREATE TABLE IF NOT EXISTS lifecycle_erasures (
  request_id INTEGER PRIMARY KEY,
  records INTEGER NOT NULL DEFAULT 0,
  identities INTEGER NOT NULL DEFAULT 0,
  links INTEGER NOT NULL DEFAULT 0,
  max_seq INTEGER NOT NULL DEFAULT 0,
  -- The deleted records with an event id (lifecycle-backend.ts erasedRecordEntry); named when it held only straddlers.
  straddlers TEXT NOT NULL DEFAULT '[]'
);`;

/** Records deleted per write transaction of a person's deletion: a few MB of WAL at most. */
const DELETE_CHUNK = 200;

export class SqliteViewEraser implements ViewEraser {
  readonly #db: Database.Database;
  readonly #s;
  /**
   * The file's generation (merged-view/view-generation.ts), bumped in every transaction that deleted
   * or changed a record, an identity node or a link: the partition's consumer keeps links in memory
   * across batches and drops them when it moved.
   */
  readonly #generation;
  /** The file's fence (merged-view/view-fence.ts), set and released by lifecycle/parts-fence.ts. */
  readonly #fence: FenceStatements;

  constructor(viewFile: string) {
    this.#db = new Database(viewFile, { fileMustExist: true });
    this.#db.pragma('busy_timeout = 5000');
    // As the consumer's connection: retention that a power loss rolls back runs again next round.
    // Deletions of a person's data sync their commit (#durably), since the request is then marked done.
    this.#db.pragma('synchronous = NORMAL');
    // Checkpoints are the worker main thread's (consumer/sqlite-view-checkpointer.ts) and this eraser's
    // own after a deletion (clearOldCopies), never inside a deletion's commit.
    this.#db.pragma('wal_autocheckpoint = 65536');
    this.#db.pragma(`journal_size_limit = ${VIEW_JOURNAL_SIZE_LIMIT}`);
    // Every deleted byte is overwritten with zeros, freed pages included (issue 29).
    this.#db.pragma('secure_delete = ON');
    // Retention reads records by data set and age; the consumer maintains this index from now on.
    this.#db.exec('CREATE INDEX IF NOT EXISTS view_records_expiry ON view_records (data_set_id, last_received_at)');
    this.#db.exec(TALLY_SCHEMA);
    this.#db.exec(GENERATION_SCHEMA);
    this.#db.exec(FENCE_SCHEMA);
    // Links in the form this version reads (a file no view store of this version opened yet).
    migrateIdentifierLinks(this.#db);
    this.#generation = generationStatements(this.#db);
    this.#fence = fenceStatements(this.#db);
    const db = this.#db;
    this.#s = {
      expired: db.prepare(
        `SELECT rowid, record_key, identity_key, first_seq FROM view_records INDEXED BY view_records_expiry
          WHERE data_set_id = ? AND last_received_at < ? AND coalesce(json_extract(event, '$.timestamp'), 0) * 1000 + 1000 < ? LIMIT ?`,
      ),
      recordByKey: db.prepare('SELECT rowid, record_key, identity_key, first_seq FROM view_records WHERE data_set_id = ? AND record_key = ?'),
      deleteRecord: db.prepare('DELETE FROM view_records WHERE rowid = ?'),
      // The key too: a rowid read outside the transaction could have been reused meanwhile. The
      // bound is checked in the transaction, and last_seq/event_id read from the deleted row itself.
      deleteRecordOf: db.prepare('DELETE FROM view_records WHERE rowid = ? AND data_set_id = ? AND record_key = ? AND first_seq <= ? RETURNING last_seq, event_id'),
      // `events delete`: the deleted record's event too (the links only it carried go: #linksOnlyIn).
      deleteOneRecordOf: db.prepare(
        'DELETE FROM view_records WHERE rowid = ? AND data_set_id = ? AND record_key = ? AND first_seq <= ? RETURNING last_seq, event_id, event',
      ),
      // The events of the records of an identity's nodes (a JSON array of keys: #treeKeys; default
      // layout: identity_key on the record), and their record keys (sharded identity part:
      // record_identities); both read the data set's rows.
      identityEvents: db.prepare('SELECT event FROM view_records WHERE data_set_id = ? AND identity_key IN (SELECT value FROM json_each(?))').pluck(),
      identityRecordKeys: db.prepare('SELECT record_key FROM record_identities WHERE data_set_id = ? AND identity_key IN (SELECT value FROM json_each(?))').pluck(),
      recordIdentityOf: db.prepare('SELECT identity_key FROM record_identities WHERE data_set_id = ? AND record_key = ?').pluck(),
      eventOf: db.prepare('SELECT event FROM view_records WHERE data_set_id = ? AND record_key = ?').pluck(),
      deleteLink: db.prepare('DELETE FROM identity_identifiers WHERE data_set_id = ? AND identifier = ?'),
      lessIdentifiers: db.prepare('UPDATE identity_nodes SET identifier_count = identifier_count - 1 WHERE data_set_id = ? AND identity_key = ?'),
      node: db.prepare('SELECT identity_key, parent, event_count FROM identity_nodes WHERE data_set_id = ? AND identity_key = ?'),
      decrement: db.prepare('UPDATE identity_nodes SET event_count = event_count - 1 WHERE data_set_id = ? AND identity_key = ? RETURNING event_count').pluck(),
      decrementBy: db.prepare('UPDATE identity_nodes SET event_count = event_count - ? WHERE data_set_id = ? AND identity_key = ?'),
      members: db.prepare('SELECT identity_key FROM identity_nodes INDEXED BY identity_nodes_parent WHERE data_set_id = ? AND parent = ?').pluck(),
      deleteNode: db.prepare('DELETE FROM identity_nodes WHERE data_set_id = ? AND identity_key = ?'),
      deleteLinks: db.prepare('DELETE FROM identity_identifiers WHERE data_set_id = ? AND identity_key = ?'),
      linksOf: db.prepare('SELECT identifier FROM identity_identifiers WHERE data_set_id = ? AND identity_key = ?').pluck(),
      linkOf: db.prepare('SELECT identity_key FROM identity_identifiers WHERE data_set_id = ? AND identifier = ?').pluck(),
      usage: db.prepare('SELECT count(*) AS records, sum(length(event)) AS event_bytes FROM view_records WHERE data_set_id = ?'),
      offset: db.prepare('SELECT next_seq FROM consumer_offsets WHERE consumer = ?').pluck(),
      recordPage: db.prepare('SELECT rowid, record_key, identity_key, first_seq FROM view_records WHERE rowid > ? AND data_set_id = ? ORDER BY rowid LIMIT ?'),
      tally: db.prepare('SELECT records, identities, links, max_seq, straddlers FROM lifecycle_erasures WHERE request_id = ?'),
      addTally: db.prepare(
        `INSERT INTO lifecycle_erasures (request_id, records, identities, links, max_seq, straddlers) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (request_id) DO UPDATE SET records = records + excluded.records, identities = identities + excluded.identities,
           links = links + excluded.links, max_seq = max(max_seq, excluded.max_seq),
           straddlers = CASE WHEN excluded.straddlers = '[]' THEN straddlers
                             ELSE (SELECT json_group_array(value) FROM (SELECT value FROM json_each(straddlers) UNION SELECT value FROM json_each(excluded.straddlers))) END`,
      ),
      clearTally: db.prepare('DELETE FROM lifecycle_erasures WHERE request_id = ?'),
      // The sharded layout (sharded-view-eraser.ts): a record shard's rows, an identity part's record_identities.
      deleteRecordIdentity: db.prepare('DELETE FROM record_identities WHERE data_set_id = ? AND record_key = ? RETURNING identity_key'),
      recordIdentityPage: db.prepare('SELECT record_key, identity_key FROM record_identities WHERE data_set_id = ? AND record_key > ? ORDER BY record_key LIMIT ?'),
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
   * Stops the file's consumer where it is: under the write lock (no batch is being committed), the
   * fence is set just below its offset, for `holder`. Returns that offset (merged-view/view-fence.ts).
   */
  freeze(holder: number): number {
    return this.#durably(() =>
      this.#db.transaction(() => {
        const offset = this.offset();
        this.#fence.set(offset - 1, holder);
        return offset;
      }).immediate(),
    );
  }

  /** Lets the consumer apply up to `upToSeq` and no further (never below its offset: fences only stop). */
  holdAt(upToSeq: number, holder: number): void {
    this.#durably(() =>
      this.#db.transaction(() => {
        if (this.offset() > upToSeq + 1) throw new Error(`view fence below the consumer's offset (${this.offset()} > ${upToSeq + 1})`);
        this.#fence.set(upToSeq, holder);
      }).immediate(),
    );
  }

  /** The fence and its holder, or null (merged-view/view-fence.ts). */
  fence(): { upToSeq: number; holder: number } | null {
    const upToSeq = this.#fence.read();
    return upToSeq === null ? null : { upToSeq, holder: this.#fence.holder()! };
  }

  /** The consumer goes on. */
  releaseFence(): void {
    this.#durably(() => this.#fence.clear());
  }

  /** Runs `work` with synchronous=FULL: its commits are on disk before the request is marked done. */
  #durably<T>(work: () => T): T {
    this.#db.pragma('synchronous = FULL');
    try {
      return work();
    } finally {
      this.#db.pragma('synchronous = NORMAL');
    }
  }

  /** The identity key `identifier` is linked to, or undefined. */
  #linkOf(dataSetId: string, identifier: string): string | undefined {
    const stored = this.#s.linkOf.get(dataSetId, storedIdentifier(identifier)) as StoredIdentityKey | undefined;
    return stored === undefined ? undefined : identityKeyOfStored(stored);
  }

  #rootOf(dataSetId: string, key: string): string | null {
    const node = this.#s.node.get(dataSetId, key) as { identity_key: string; parent: string | null } | undefined;
    return node ? (node.parent ?? node.identity_key) : null;
  }

  /** The identity (root and absorbed keys) and its identifiers, or null when unknown. */
  async findIdentity(dataSetId: string, target: { identifier: string } | { identityKey: string }): Promise<IdentityToErase | null> {
    const start = 'identifier' in target ? this.#linkOf(dataSetId, target.identifier) : target.identityKey;
    if (start === undefined) return null;
    const root = this.#rootOf(dataSetId, start);
    if (root === null) return null;
    const keys = this.#treeKeys(dataSetId, root);
    const identifiers = keys.flatMap((k) => (this.#s.linksOf.all(dataSetId, storedIdentityKey(k)) as StoredIdentifier[]).map(identifierOfStored)).sort();
    return { root, keys, identifiers };
  }

  /** The keys of the identity tree of `root`: the root and the nodes it absorbed (trees are flat). */
  #treeKeys(dataSetId: string, root: string): string[] {
    return [root, ...(this.#s.members.all(dataSetId, root) as string[])];
  }

  /** Deletes the identity tree of `root`: its nodes and their links (one transaction). */
  #dropIdentity(dataSetId: string, root: string, counts: ErasedCounts): void {
    for (const key of this.#treeKeys(dataSetId, root)) {
      counts.links += this.#s.deleteLinks.run(dataSetId, storedIdentityKey(key)).changes;
      counts.identities += this.#s.deleteNode.run(dataSetId, key).changes;
    }
  }

  /**
   * Of `identifiers` (a deleted record's), those linked to the identity of `root` (to it or a node
   * it absorbed), with the node each is linked to; and the identity's links of replaceable kinds
   * (isReplaceableIdentifier), the older values a re-send may have replaced in the deleted record.
   */
  #linkedTo(dataSetId: string, root: string, identifiers: readonly string[]): { identifier: string; key: string }[] {
    const out = new Map<string, { identifier: string; key: string }>();
    for (const identifier of identifiers) {
      const key = this.#linkOf(dataSetId, identifier);
      if (key !== undefined && this.#rootOf(dataSetId, key) === root) out.set(identifier, { identifier, key });
    }
    for (const key of this.#treeKeys(dataSetId, root)) {
      for (const stored of this.#s.linksOf.all(dataSetId, storedIdentityKey(key)) as StoredIdentifier[]) {
        const identifier = identifierOfStored(stored);
        if (isReplaceableIdentifier(identifier)) out.set(identifier, { identifier, key });
      }
    }
    return [...out.values()];
  }

  /**
   * Deletes these links of the identity of `root` (inside a transaction), each taken from its node's
   * identifier count and from the root's (which counts those of the nodes it absorbed).
   */
  #dropLinks(dataSetId: string, root: string, links: readonly { identifier: string; key: string }[], counts: ErasedCounts): void {
    for (const { identifier, key } of links) {
      if (this.#s.deleteLink.run(dataSetId, storedIdentifier(identifier)).changes === 0) continue;
      counts.links++;
      this.#s.lessIdentifiers.run(dataSetId, key);
      if (key !== root) this.#s.lessIdentifiers.run(dataSetId, root);
    }
  }

  /**
   * The links of the identity of `root` that only a deleted record carried (`identifiers`: its own,
   * and the older values of replaceable kinds: #linkedTo): those no event of `remaining()` (the
   * identity's other records) carries. Reads them only when one of these is linked to the identity,
   * and stops once every one was found carried (a
   * `for…of` left early closes a statement's iterator, so the connection is free again).
   */
  #linksOnlyIn(dataSetId: string, root: string, identifiers: readonly string[], remaining: () => Iterable<string>): { identifier: string; key: string }[] {
    const candidates = this.#linkedTo(dataSetId, root, identifiers);
    if (candidates.length === 0) return [];
    const left = new Map(candidates.map((c) => [c.identifier, c]));
    for (const event of remaining()) {
      for (const identifier of identifiersOfStoredEvent(event)) left.delete(identifier);
      if (left.size === 0) break;
    }
    return [...left.values()];
  }

  /** Deletes one record and accounts for it in its identity (inside a transaction). */
  #dropRecord(dataSetId: string, row: { rowid: number; identity_key: string | null }, counts: ErasedCounts): void {
    counts.records += this.#s.deleteRecord.run(row.rowid).changes;
    if (row.identity_key === null) return;
    const root = this.#rootOf(dataSetId, row.identity_key);
    if (root === null) return;
    const left = this.#s.decrement.get(dataSetId, root) as number | undefined;
    if (left !== undefined && left <= 0) this.#dropIdentity(dataSetId, root, counts);
  }

  /** `erased`: the deleted records with an event id, as their tally entries (lifecycle-backend.ts erasedRecordEntry). */
  #addTally(requestId: number, counts: ErasedCounts, maxSeq = 0, erased: readonly string[] = []): void {
    this.#s.addTally.run(requestId, counts.records, counts.identities, counts.links, maxSeq, JSON.stringify(erased));
  }

  async expire(dataSetId: string, cutoffMs: number, limit: number): Promise<ErasedCounts & { heldMs: number }> {
    const counts = zeroCounts();
    let locked = 0;
    this.#db.transaction(() => {
      locked = performance.now(); // BEGIN IMMEDIATE has the write lock now
      for (const row of this.expiredRows(dataSetId, cutoffMs, limit)) this.#dropRecord(dataSetId, row, counts);
      if (counts.records + counts.identities + counts.links > 0) this.#generation.bump();
    }).immediate();
    return { ...counts, heldMs: performance.now() - locked };
  }

  async deleteRecord(requestId: number, dataSetId: string, recordKey: string, boundSeq: number): Promise<void> {
    this.#durably(() =>
      this.#db.transaction(() => {
        const counts = zeroCounts();
        const row = this.#s.recordByKey.get(dataSetId, recordKey) as RecordIdentityRow | undefined;
        if (!row || row.first_seq > boundSeq) return; // not in the view, or first queued after the request: not covered
        const gone = this.#s.deleteOneRecordOf.get(row.rowid, dataSetId, recordKey, boundSeq) as { last_seq: number; event_id: string | null; event: string } | undefined;
        if (!gone) return;
        this.#generation.bump();
        counts.records++;
        if (row.identity_key !== null) {
          const root = this.#rootOf(dataSetId, row.identity_key);
          const left = root === null ? undefined : (this.#s.decrement.get(dataSetId, root) as number | undefined);
          if (root !== null && left !== undefined && left <= 0) this.#dropIdentity(dataSetId, root, counts);
          else if (root !== null) {
            // The identity stays: the links only this record carried go (its other records are read
            // in this transaction, so none can gain one of them in between).
            const remaining = () => this.#s.identityEvents.iterate(dataSetId, JSON.stringify(this.#treeKeys(dataSetId, root))) as IterableIterator<string>;
            this.#dropLinks(dataSetId, root, this.#linksOnlyIn(dataSetId, root, identifiersOfStoredEvent(gone.event), remaining), counts);
          }
        }
        const erased = gone.event_id === null ? [] : [erasedRecordEntry({ eventId: gone.event_id, lastSeq: gone.last_seq })];
        this.#addTally(requestId, counts, gone.event_id === null ? 0 : gone.last_seq, erased);
      }).immediate(),
    );
  }

  /** The cursor is a rowid: a scan in rowid order, so that no index is needed on the consumer's path. */
  async deleteIdentityRecords(
    requestId: number,
    dataSetId: string,
    identity: { root: string; keys: ReadonlySet<string> },
    boundSeq: number,
    afterRowid: number,
    limit: number,
  ): Promise<{ next: number | null; deletedEventIds: string[] }> {
    // The page is read without the write lock; only the deletes take it. A record that changed
    // identity meanwhile is still one of the identity's (its keys only grow by absorbing others).
    const rows = this.#s.recordPage.all(afterRowid, dataSetId, limit) as RecordIdentityRow[];
    const doomed = rows.filter((row) => row.identity_key !== null && identity.keys.has(row.identity_key) && row.first_seq <= boundSeq);
    // The identity keeps count of its records, in the transaction that deletes them: it goes
    // (deleteIdentity) once none is left.
    const gone = this.deleteRows(requestId, dataSetId, doomed, boundSeq, (deleted) => void this.#s.decrementBy.run(deleted, dataSetId, identity.root));
    const deletedEventIds = gone.keys.filter((key) => key.startsWith('id:')).map((key) => key.slice(3));
    return { next: rows.length < limit ? null : rows[rows.length - 1]!.rowid, deletedEventIds };
  }

  async deleteIdentity(requestId: number, dataSetId: string, root: string): Promise<void> {
    this.#durably(() =>
      this.#db.transaction(() => {
        const node = this.#s.node.get(dataSetId, root) as { event_count: number } | undefined;
        // Records first queued after the request keep the identity (and its links) alive.
        if (!node || node.event_count > 0) return;
        const counts = zeroCounts();
        this.#dropIdentity(dataSetId, root, counts);
        this.#generation.bump();
        this.#addTally(requestId, counts);
      }).immediate(),
    );
  }

  // The sharded layout's parts (sharded-view-eraser.ts): a record shard holds records without
  // identity (identity_key NULL), an identity part identities and record_identities.

  /** Record shard: the rows of these keys that exist (rowid, first_seq). */
  recordRows(dataSetId: string, keys: readonly string[]): RecordIdentityRow[] {
    const rows: RecordIdentityRow[] = [];
    for (const key of keys) {
      const row = this.#s.recordByKey.get(dataSetId, key) as RecordIdentityRow | undefined;
      if (row) rows.push(row);
    }
    return rows;
  }

  /** Up to `limit` rows retention deletes (`expire` here; a record shard's in sharded-view-eraser.ts), without deleting them. */
  expiredRows(dataSetId: string, cutoffMs: number, limit: number): RecordIdentityRow[] {
    return this.#s.expired.all(dataSetId, cutoffMs, cutoffMs, limit) as RecordIdentityRow[];
  }

  /**
   * Deletes these rows if first queued up to `boundSeq` (a record shard's, or a person's in a data-set
   * partition: deleteIdentityRecords), DELETE_CHUNK per transaction, a passive checkpoint after each,
   * counted in the request's tally (with their event ids and last positions) unless `requestId` is
   * null (retention). Returns the keys it deleted. `heldMs`: the write lock's hold.
   */
  deleteRows(
    requestId: number | null,
    dataSetId: string,
    rows: readonly { rowid: number; record_key: string }[],
    boundSeq: number,
    /** Run in each chunk's transaction with the number of records it deleted (when any). */
    withDeleted?: (deleted: number) => void,
  ): { keys: string[]; heldMs: number } {
    const keys: string[] = [];
    let heldMs = 0;
    for (let i = 0; i < rows.length; i += DELETE_CHUNK) {
      const chunk = rows.slice(i, i + DELETE_CHUNK);
      const write = () =>
        this.#db.transaction(() => {
          const locked = performance.now();
          const counts = zeroCounts();
          let maxSeq = 0;
          const erased: string[] = [];
          for (const row of chunk) {
            const gone = this.#s.deleteRecordOf.get(row.rowid, dataSetId, row.record_key, boundSeq) as { last_seq: number; event_id: string | null } | undefined;
            if (!gone) continue;
            counts.records++;
            keys.push(row.record_key);
            if (gone.event_id !== null) {
              erased.push(erasedRecordEntry({ eventId: gone.event_id, lastSeq: gone.last_seq }));
              maxSeq = Math.max(maxSeq, gone.last_seq);
            }
          }
          if (counts.records > 0) {
            withDeleted?.(counts.records);
            this.#generation.bump();
          }
          if (requestId !== null) this.#addTally(requestId, counts, maxSeq, erased);
          heldMs += performance.now() - locked;
        }).immediate();
      if (requestId === null) write();
      else this.#durably(write);
      checkpointPassive(this.#db);
    }
    return { keys, heldMs };
  }

  /**
   * Identity part: deletes the record_identities rows of these keys (one transaction) and takes each
   * from its identity's record count; with `dropEmpty`, an identity left without a record goes with
   * its links (else deleteIdentity does it at the end of a request). Counted in the request's tally
   * unless `requestId` is null (retention). Idempotent: a row already gone counts nothing.
   */
  dropRecordIdentities(requestId: number | null, dataSetId: string, keys: readonly string[], dropEmpty: boolean): ErasedCounts & { heldMs: number } {
    const counts = zeroCounts();
    let heldMs = 0;
    const write = () =>
      this.#db.transaction(() => {
        const locked = performance.now();
        let changed = false;
        for (const key of keys) {
          const gone = this.#s.deleteRecordIdentity.get(dataSetId, key) as { identity_key: string | null } | undefined;
          if (!gone) continue;
          changed = true;
          if (gone.identity_key === null) continue;
          const root = this.#rootOf(dataSetId, gone.identity_key);
          if (root === null) continue;
          const left = this.#s.decrement.get(dataSetId, root) as number | undefined;
          if (dropEmpty && left !== undefined && left <= 0) this.#dropIdentity(dataSetId, root, counts);
        }
        if (changed) this.#generation.bump();
        if (requestId !== null) this.#addTally(requestId, counts);
        heldMs = performance.now() - locked;
      }).immediate();
    if (requestId === null) write();
    else this.#durably(write);
    return { ...counts, heldMs };
  }

  /** Record shard: the event of a record, or undefined. */
  recordEvent(dataSetId: string, recordKey: string): string | undefined {
    return this.#s.eventOf.get(dataSetId, recordKey) as string | undefined;
  }

  /** Identity part: the root of a record's identity (its record_identities row), or null when it has none here. */
  identityRootOfRecord(dataSetId: string, recordKey: string): string | null {
    const key = this.#s.recordIdentityOf.get(dataSetId, recordKey) as string | null | undefined;
    return key === undefined || key === null ? null : this.#rootOf(dataSetId, key);
  }

  /** Identity part: the keys of the records of the identity of `root` (reads the data set's record_identities). */
  identityRecordKeys(dataSetId: string, root: string): string[] {
    return this.#s.identityRecordKeys.all(dataSetId, JSON.stringify(this.#treeKeys(dataSetId, root))) as string[];
  }

  /**
   * Identity part: drops the links of the identity of `root` to `identifiers` (a record's, about to
   * be deleted) that no event of `remaining()` carries, in one transaction, counted in the request's
   * tally. Idempotent (a link already gone counts nothing).
   */
  dropLinksOnlyIn(requestId: number, dataSetId: string, root: string, identifiers: readonly string[], remaining: () => Iterable<string>): void {
    this.#durably(() =>
      this.#db.transaction(() => {
        const counts = zeroCounts();
        this.#dropLinks(dataSetId, root, this.#linksOnlyIn(dataSetId, root, identifiers, remaining), counts);
        if (counts.links === 0) return;
        this.#generation.bump();
        this.#addTally(requestId, counts);
      }).immediate(),
    );
  }

  /** Identity part: the next `limit` record_identities rows of the data set after `afterKey`, in key order. */
  recordIdentityPage(dataSetId: string, afterKey: string, limit: number): { record_key: string; identity_key: string | null }[] {
    return this.#s.recordIdentityPage.all(dataSetId, afterKey, limit) as { record_key: string; identity_key: string | null }[];
  }

  async tally(requestId: number): Promise<ViewTally> {
    const row = this.#s.tally.get(requestId) as { records: number; identities: number; links: number; max_seq: number; straddlers: string } | undefined;
    if (!row) return { records: 0, identities: 0, links: 0, maxSeq: 0, erased: [] };
    return { records: row.records, identities: row.identities, links: row.links, maxSeq: row.max_seq, erased: (JSON.parse(row.straddlers) as string[]).map(erasedRecordOf) };
  }

  async clearTally(requestId: number): Promise<void> {
    this.#durably(() => this.#s.clearTally.run(requestId));
  }

  /** Zeroes the pages' unallocated space (unless `scrub: false`), copies the WAL back and truncates it (fs/old-copies.ts). */
  async clearOldCopies(options: OldCopiesOptions = {}): Promise<boolean> {
    return clearOldCopies(this.#db, { scrub: options.scrub });
  }

  close(): void {
    if (this.#db.open) this.#db.close();
  }
}
