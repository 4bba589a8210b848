/**
 * Embedded store of the asynchronous side: one partition of the view, `<env>/view.db` or
 * `view-p<k>.db` (merged records, identities, view counters, the partition's consumer offset;
 * sqlite-view-layout.ts), and `<env>/ingest-stats.db` (ingest outcomes from the serving processes).
 *
 * A view file has one writer, its partition's consumer thread; the CLI and the admin port only read it (WAL: readers never
 * block the writer nor wait for it). `synchronous = NORMAL`: a commit is not fsynced, so a power
 * loss may roll back the last few batches; but a batch and its offset are one transaction, so
 * they roll back together and are simply applied again from the queue (which is synced). Nothing
 * is lost and nothing applies twice; the view is derived data.
 *
 * ingest-stats.db is a file of its own so that a serving process's once-a-second flush never waits
 * for a consumer batch holding view.db's write lock (SQLite has one writer per file, WAL or not).
 */
import Database from 'better-sqlite3';
import { prepareDatabaseFile } from '../fs/durable-files.js';
import type { CounterRow } from '../model/hourly-counters.js';
import type { JsonObject } from './merge.js';
import {
  pairKey,
  type ConsumerHeartbeat,
  type DataSetCounterDelta,
  type IdentifierLink,
  type IdentityNode,
  type IdentityView,
  type IngestStatsStore,
  type MergedRecord,
  type RecordIdentity,
  type RecordRef,
  type ViewStore,
  type ViewTransaction,
} from './view-store.js';
import { fixViewLayout, LAYOUT_SCHEMA, recordedViewLayout, type ViewLayout } from './sqlite-view-layout.js';
import { nodeOf, recordOf, type NodeRow, type RecordRow as SharedRecordRow } from './view-rows.js';
import { GENERATION_SCHEMA, generationStatements } from './view-generation.js';
import { FENCE_SCHEMA, fenceStatements, type FenceStatements } from './view-fence.js';
import { ViewHotState, type HotStats } from './view-hot-state.js';
import {
  identifierOfStored,
  identityKeyOfStored,
  migrateIdentifierLinks,
  storedDigestHex,
  storedIdentifier,
  storedIdentityKey,
  type StoredIdentifier,
  type StoredIdentityKey,
} from './identifier-link-columns.js';

export const VIEW_SCHEMA = `
CREATE TABLE IF NOT EXISTS view_records (
  data_set_id TEXT NOT NULL,
  record_key TEXT NOT NULL,
  event_id TEXT,
  first_seq INTEGER NOT NULL,
  last_seq INTEGER NOT NULL,
  first_received_at INTEGER NOT NULL,
  last_received_at INTEGER NOT NULL,
  merged_count INTEGER NOT NULL,
  identity_key TEXT,
  measurement_only INTEGER NOT NULL,
  event TEXT NOT NULL,
  PRIMARY KEY (data_set_id, record_key)
);
CREATE TABLE IF NOT EXISTS identity_nodes (
  data_set_id TEXT NOT NULL,
  identity_key TEXT NOT NULL,
  parent TEXT,
  created_seq INTEGER NOT NULL,
  event_count INTEGER NOT NULL,
  identifier_count INTEGER NOT NULL,
  PRIMARY KEY (data_set_id, identity_key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS identity_nodes_parent ON identity_nodes (data_set_id, parent) WHERE parent IS NOT NULL;
CREATE TABLE IF NOT EXISTS record_identities (
  data_set_id TEXT NOT NULL,
  record_key TEXT NOT NULL,
  first_received_at INTEGER NOT NULL,
  identity_key TEXT,
  PRIMARY KEY (data_set_id, record_key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS view_counters (
  data_set_id TEXT NOT NULL,
  hour INTEGER NOT NULL,
  name TEXT NOT NULL,
  n INTEGER NOT NULL,
  PRIMARY KEY (data_set_id, hour, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS consumer_offsets (
  consumer TEXT PRIMARY KEY,
  next_seq INTEGER NOT NULL
) WITHOUT ROWID;
${LAYOUT_SCHEMA}
${GENERATION_SCHEMA}
${FENCE_SCHEMA}
CREATE TABLE IF NOT EXISTS consumer_heartbeats (
  consumer TEXT PRIMARY KEY,
  pid INTEGER NOT NULL,
  at INTEGER NOT NULL
) WITHOUT ROWID;
`;

export const INGEST_STATS_SCHEMA = `
CREATE TABLE IF NOT EXISTS ingest_counters (
  data_set_id TEXT NOT NULL,
  hour INTEGER NOT NULL,
  name TEXT NOT NULL,
  n INTEGER NOT NULL,
  PRIMARY KEY (data_set_id, hour, name)
) WITHOUT ROWID;
`;

/**
 * Bytes a view file's WAL is truncated to when it starts over after a checkpoint (16 MiB): a burst
 * or a large deletion no longer leaves a WAL of hundreds of MB behind for good (issue 29). At full
 * rate the WAL grows past it again between two checkpoints (consumer/sqlite-view-checkpointer.ts).
 */
export const VIEW_JOURNAL_SIZE_LIMIT = 16 * 1024 * 1024;

function openDatabase(
  file: string,
  schema: string,
  options: { readonly?: boolean; busyTimeoutMs?: number; migrate?: (db: Database.Database) => unknown } = {},
): Database.Database {
  prepareDatabaseFile(file); // durable directory entries, 0700/0600 (durable-files.ts)
  const db = new Database(file);
  try {
    db.pragma(`busy_timeout = ${options.busyTimeoutMs ?? 5000}`);
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    // What the consumer deletes or rewrites (a record rewritten by a merge) is overwritten with
    // zeros, so that a deleted record leaves no old copy in free space (issue 29; the cost is in
    // bench/README.md "secure_delete"). The old copies of moved cells that a page rebuilt by a split
    // keeps in its unallocated space are zeroed after deletions by fs/page-gap-scrub.ts.
    db.pragma('secure_delete = ON');
    // A WAL that grew (a burst, a large deletion) is cut back to this when it starts over.
    db.pragma(`journal_size_limit = ${VIEW_JOURNAL_SIZE_LIMIT}`);
    db.exec(schema);
    options.migrate?.(db);
  } catch (error) {
    db.close(); // e.g. "database is locked": the caller may try again, and leaks no connection
    throw error;
  }
  return db;
}

/** A view file's connection: WAL, schema, identifier links in their compact form (identifier-link-columns.ts). */
const openViewDatabase = (file: string) => openDatabase(file, VIEW_SCHEMA, { migrate: migrateIdentifierLinks });

/** Creates a view file (WAL, schema) if it does not exist yet, and closes it. */
export function prepareViewFile(file: string): void {
  openViewDatabase(file).close();
}

interface RecordRow extends SharedRecordRow {
  rowid?: number;
}

/** Keys grouped by data set, each group sorted. */
function byDataSet<T extends { dataSetId: string }>(items: readonly T[], keyOf: (item: T) => string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const item of items) {
    let keys = out.get(item.dataSetId);
    if (!keys) out.set(item.dataSetId, (keys = []));
    keys.push(keyOf(item));
  }
  for (const keys of out.values()) keys.sort();
  return out;
}

/** SQLite page cache of each open view file, KiB (`PRAGMA cache_size` negative form). */
export const VIEW_PAGE_CACHE_KB = 16_384;

const byKey = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
const nodeOrder = (a: IdentityNode, b: IdentityNode) => byKey(a.dataSetId, b.dataSetId) || byKey(a.identityKey, b.identityKey);
const linkOrder = (a: IdentifierLink, b: IdentifierLink) => byKey(a.dataSetId, b.dataSetId) || byKey(a.identifier, b.identifier);
const recordIdentityOrder = (a: RecordIdentity, b: RecordIdentity) => byKey(a.dataSetId, b.dataSetId) || byKey(a.recordKey, b.recordKey);
const sortedBy = <T>(items: readonly T[], order: (a: T, b: T) => number): T[] => [...items].sort(order);

export class SqliteViewStore implements ViewStore {
  readonly #db: Database.Database;
  readonly #s;
  readonly #tx: ViewTransaction;
  #inTransaction = false;
  readonly #generation;
  readonly #fence: FenceStatements;
  /** The consumer's hot state across batches (view-hot-state.ts), or null (readers, tests that ask for none). */
  readonly #hot: ViewHotState | null;
  /** What the open transaction wrote that the hot state takes after its COMMIT. */
  #pendingLinks: IdentifierLink[] = [];
  #pendingOffset: { consumer: string; nextSeq: number } | null = null;
  /** The open transaction wrote something: its reads no longer show the committed state alone. */
  #wrote = false;

  /**
   * `autocheckpointPages`: WAL pages after which a commit also checkpoints (default 65,536, 256 MB).
   * A page written again before the next checkpoint is copied into the file once: the view's hot
   * pages (identity nodes, the record index's tail, counters) are written by nearly every batch, and
   * checkpointing every 256 MB rather than every 32 MB cut the bytes written per event by ~18%
   * (bench/README.md). The cost is disk: the WAL file grows to ~256 MB before it starts over, and a
   * reopen after a crash reads that much WAL. A partition thread (P > 1) leaves checkpoints to its
   * process's main thread (consumer/sqlite-view-checkpointer.ts) and keeps this one as a safety net.
   * `hotLinks`: the hot state's bound (view-hot-state.ts; absent or 0: none). `hotTableMaxProbe`:
   * tests only, a short probe bound that makes the hot state's tables give up (identifier-link-table.ts).
   */
  constructor(file: string, options: { autocheckpointPages?: number; hotLinks?: number; hotTableMaxProbe?: number } = {}) {
    this.#db = openViewDatabase(file);
    this.#generation = generationStatements(this.#db);
    this.#fence = fenceStatements(this.#db);
    this.#hot = options.hotLinks !== undefined && options.hotLinks > 0 ? new ViewHotState(options.hotLinks, options.hotTableMaxProbe === undefined ? {} : { maxProbe: options.hotTableMaxProbe }) : null;
    // Page cache per open view file: 16 MB. Lookups of random keys (sha256 identifiers, record ids)
    // miss any cache smaller than the view, and a miss is a read from the OS's file cache: 64 MB
    // per file showed no CPU gain per event against 16 MB and cost ~100 MB of the consumer's RSS
    // with P = 2 (issue 17, bench/README.md "Memory per process").
    this.#db.pragma(`cache_size = -${VIEW_PAGE_CACHE_KB}`);
    this.#db.pragma(`wal_autocheckpoint = ${options.autocheckpointPages ?? 65_536}`);
    const db = this.#db;
    this.#s = {
      offset: db.prepare('SELECT next_seq FROM consumer_offsets WHERE consumer = ?').pluck(),
      setOffset: db.prepare(
        'INSERT INTO consumer_offsets (consumer, next_seq) VALUES (?, ?) ON CONFLICT (consumer) DO UPDATE SET next_seq = excluded.next_seq',
      ),
      record: db.prepare('SELECT * FROM view_records WHERE data_set_id = ? AND record_key = ?'),
      records: db.prepare('SELECT * FROM view_records WHERE data_set_id = ? AND record_key IN (SELECT value FROM json_each(?))'),
      // Stored forms (identifier-link-columns.ts): digests as hex in the JSON array (unhex), others as text.
      linksOfDigests: db
        .prepare('SELECT identifier, identity_key FROM identity_identifiers WHERE data_set_id = ? AND identifier IN (SELECT unhex(value) FROM json_each(?))')
        .raw(),
      linksOfTexts: db.prepare('SELECT identifier, identity_key FROM identity_identifiers WHERE data_set_id = ? AND identifier IN (SELECT value FROM json_each(?))').raw(),
      allLinks: db.prepare('SELECT identifier, identity_key FROM identity_identifiers WHERE data_set_id = ?').raw(),
      // Stops at `atMost` (ViewHotState.countBound): a data set far past the hot links' bound is not counted whole.
      countLinks: db.prepare('SELECT count(*) FROM (SELECT 1 FROM identity_identifiers WHERE data_set_id = ? LIMIT ?)').pluck(),
      nodes: db.prepare('SELECT * FROM identity_nodes WHERE data_set_id = ? AND identity_key IN (SELECT value FROM json_each(?))'),
      upsertRecord: db.prepare(
        `INSERT INTO view_records (data_set_id, record_key, event_id, first_seq, last_seq, first_received_at, last_received_at,
           merged_count, identity_key, measurement_only, event)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (data_set_id, record_key) DO UPDATE SET
           event_id = excluded.event_id, first_seq = excluded.first_seq, last_seq = excluded.last_seq,
           first_received_at = excluded.first_received_at, last_received_at = excluded.last_received_at,
           merged_count = excluded.merged_count, identity_key = excluded.identity_key,
           measurement_only = excluded.measurement_only, event = excluded.event`,
      ),
      insertLink: db.prepare('INSERT OR REPLACE INTO identity_identifiers (data_set_id, identifier, identity_key) VALUES (?, ?, ?)'),
      node: db.prepare('SELECT * FROM identity_nodes WHERE data_set_id = ? AND identity_key = ?'),
      // An upsert, not INSERT OR REPLACE: REPLACE deletes and re-inserts the row, touching the
      // parent index too even when the parent did not change; an update in place does not.
      upsertNode: db.prepare(
        `INSERT INTO identity_nodes (data_set_id, identity_key, parent, created_seq, event_count, identifier_count) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (data_set_id, identity_key) DO UPDATE SET
           parent = excluded.parent, created_seq = excluded.created_seq, event_count = excluded.event_count, identifier_count = excluded.identifier_count`,
      ),
      // INDEXED BY: without statistics the planner would scan the data set's nodes by primary key.
      reparent: db.prepare('UPDATE identity_nodes INDEXED BY identity_nodes_parent SET parent = ? WHERE data_set_id = ? AND parent = ?'),
      addCounter: db
        .prepare(
          'INSERT INTO view_counters (data_set_id, hour, name, n) VALUES (?, ?, ?, ?) ON CONFLICT (data_set_id, hour, name) DO UPDATE SET n = n + excluded.n RETURNING n',
        )
        .pluck(),
      dropZeroCounter: db.prepare('DELETE FROM view_counters WHERE data_set_id = ? AND hour = ? AND name = ? AND n = 0'),
      counters: db.prepare('SELECT hour, name, n FROM view_counters WHERE data_set_id = ? AND hour >= ?'),
      members: db.prepare('SELECT identity_key FROM identity_nodes INDEXED BY identity_nodes_parent WHERE data_set_id = ? AND parent = ? ORDER BY identity_key').pluck(),
      identifiersOf: db.prepare('SELECT identifier FROM identity_identifiers WHERE data_set_id = ? AND identity_key = ?').pluck(),
      exportPage: db.prepare(
        'SELECT rowid, * FROM view_records WHERE rowid > ? AND data_set_id = ? AND last_received_at >= ? ORDER BY rowid LIMIT 1000',
      ),
      // Sharded layout, identity stage (consumer/identity-stage-applier.ts).
      recordIdentities: db.prepare(
        'SELECT record_key, first_received_at, identity_key FROM record_identities WHERE data_set_id = ? AND record_key IN (SELECT value FROM json_each(?))',
      ),
      recordIdentity: db.prepare('SELECT identity_key FROM record_identities WHERE data_set_id = ? AND record_key = ?').pluck(),
      upsertRecordIdentity: db.prepare(
        `INSERT INTO record_identities (data_set_id, record_key, first_received_at, identity_key) VALUES (?, ?, ?, ?)
         ON CONFLICT (data_set_id, record_key) DO UPDATE SET first_received_at = excluded.first_received_at, identity_key = excluded.identity_key`,
      ),
      heartbeat: db.prepare(
        'INSERT INTO consumer_heartbeats (consumer, pid, at) VALUES (?, ?, ?) ON CONFLICT (consumer) DO UPDATE SET pid = excluded.pid, at = excluded.at',
      ),
      lastHeartbeat: db.prepare('SELECT consumer, pid, at FROM consumer_heartbeats WHERE consumer = ?'),
    };
    const s = this.#s;
    this.#tx = {
      offset: async (consumer) => (s.offset.get(consumer) as number | undefined) ?? 1,
      fence: async () => this.#fence.read(),
      setOffset: async (consumer, nextSeq) => {
        this.#wrote = true;
        s.setOffset.run(consumer, nextSeq);
        this.#pendingOffset = { consumer, nextSeq };
      },
      // Bulk reads: one statement per data set over a JSON array of keys (json_each), the keys
      // sorted so that the B-tree is walked in order. A few statements per batch instead of one
      // call per key.
      loadRecords: async (refs: readonly RecordRef[]) => {
        const out = new Map<string, MergedRecord>();
        for (const [dataSetId, keys] of byDataSet(refs, (r) => r.recordKey)) {
          for (const row of s.records.all(dataSetId, JSON.stringify(keys)) as RecordRow[]) out.set(pairKey(dataSetId, row.record_key), recordOf(row));
        }
        return out;
      },
      loadIdentifierLinks: async (pairs) => {
        const out = new Map<string, string>();
        // The hot state answers for the data sets it holds, as long as this transaction wrote nothing
        // yet (its reads are then the committed state, which is what the hot state holds).
        const hot = this.#wrote ? null : this.#hot;
        const asked = hot ? this.#linksFromHot(hot, pairs, out) : pairs;
        for (const [dataSetId, identifiers] of byDataSet(asked, (p) => p.identifier)) this.#readLinks(dataSetId, identifiers, out);
        return out;
      },
      loadIdentities: async (pairs) => {
        const out = new Map<string, IdentityNode>();
        for (const [dataSetId, keys] of byDataSet(pairs, (p) => p.identityKey)) {
          for (const row of s.nodes.all(dataSetId, JSON.stringify(keys)) as NodeRow[]) out.set(pairKey(dataSetId, row.identity_key), nodeOf(row));
        }
        return out;
      },
      // Records in the order given: a new record's rowid is its place in `events export`'s order
      // of first arrival.
      writeRecords: async (records) => {
        this.#wrote = true;
        for (const r of records) {
          s.upsertRecord.run(
            r.dataSetId, r.recordKey, r.eventId, r.firstSeq, r.lastSeq, r.firstReceivedAt, r.lastReceivedAt,
            r.mergedCount, r.identityKey, r.measurementOnly ? 1 : 0, JSON.stringify(r.event),
          );
        }
      },
      writeIdentities: async (nodes) => {
        this.#wrote = true;
        for (const n of sortedBy(nodes, nodeOrder)) s.upsertNode.run(n.dataSetId, n.identityKey, n.parent, n.createdSeq, n.eventCount, n.identifierCount);
      },
      reparentIdentities: async (moves) => {
        this.#wrote = true;
        for (const m of moves) s.reparent.run(m.to, m.dataSetId, m.from);
      },
      // Identity rows in key order: consecutive writes land on neighbouring B-tree pages, so each
      // page is fetched and dirtied once in a run rather than at random.
      linkIdentifiers: async (links: readonly IdentifierLink[]) => {
        this.#wrote = true;
        if (this.#hot) for (const l of links) this.#pendingLinks.push(l);
        for (const l of sortedBy(links, linkOrder)) s.insertLink.run(l.dataSetId, storedIdentifier(l.identifier), storedIdentityKey(l.identityKey));
      },
      loadRecordIdentities: async (refs) => {
        const out = new Map<string, RecordIdentity>();
        for (const [dataSetId, keys] of byDataSet(refs, (r) => r.recordKey)) {
          for (const row of s.recordIdentities.all(dataSetId, JSON.stringify(keys)) as { record_key: string; first_received_at: number; identity_key: string | null }[]) {
            out.set(pairKey(dataSetId, row.record_key), { dataSetId, recordKey: row.record_key, firstReceivedAt: row.first_received_at, identityKey: row.identity_key });
          }
        }
        return out;
      },
      // In key order, as identity rows (neighbouring B-tree pages in a run).
      writeRecordIdentities: async (rows) => {
        this.#wrote = true;
        for (const r of sortedBy(rows, recordIdentityOrder)) s.upsertRecordIdentity.run(r.dataSetId, r.recordKey, r.firstReceivedAt, r.identityKey);
      },
      addCounters: async (deltas) => {
        this.#wrote = true;
        for (const d of deltas) {
          if (d.n === 0) continue;
          // A counter brought back to zero disappears, so the stored state never depends on how
          // the records were split into batches. (Not only by a negative delta: a value sum with
          // refunds, negative values, can return to zero from below.)
          if ((s.addCounter.get(d.dataSetId, d.hour, d.name, d.n) as number) === 0) s.dropZeroCounter.run(d.dataSetId, d.hour, d.name);
        }
      },
    };
  }

  /** The view's layout: recorded in this file (partition 0), else `requested`, recorded now. */
  fixLayout(requested: ViewLayout): ViewLayout {
    return fixViewLayout(this.#db, requested);
  }

  /** The recorded layout (this file is partition 0), or null while none is. */
  recordedLayout(): ViewLayout | null {
    return recordedViewLayout(this.#db);
  }

  async transaction<T>(work: (tx: ViewTransaction) => Promise<T>): Promise<T> {
    if (this.#inTransaction) throw new Error('view store: nested transaction');
    this.#inTransaction = true;
    this.#db.exec('BEGIN IMMEDIATE');
    this.#wrote = false;
    this.#pendingLinks = [];
    this.#pendingOffset = null;
    try {
      if (this.#hot) this.#validateHot(this.#hot);
      const result = await work(this.#tx);
      this.#db.exec('COMMIT');
      if (this.#hot) this.#commitHot(this.#hot);
      return result;
    } catch (error) {
      if (this.#db.inTransaction) this.#db.exec('ROLLBACK');
      throw error;
    } finally {
      this.#inTransaction = false;
      this.#pendingLinks = [];
      this.#pendingOffset = null;
    }
  }

  /**
   * Under the write lock (no other writer can commit until this transaction ends): the hot state is
   * kept only if the file's generation is the one it was filled at (no eraser ran) and the offset is
   * the one this consumer committed last (no other consumer applied batches here).
   */
  #validateHot(hot: ViewHotState): void {
    const generation = this.#generation.read();
    const committed = hot.committed;
    const offsetMoved = committed !== null && ((this.#s.offset.get(committed.consumer) as number | undefined) ?? 1) !== committed.nextSeq;
    if (generation !== hot.generation || offsetMoved) {
      hot.clear();
      hot.generation = generation;
    }
  }

  /** After COMMIT: what the transaction wrote becomes hot state. */
  #commitHot(hot: ViewHotState): void {
    for (const l of this.#pendingLinks) hot.addLink(l.dataSetId, l.identifier, l.identityKey);
    if (this.#pendingOffset) hot.committed = this.#pendingOffset;
  }

  /** Answers `pairs` from the hot state into `out`; returns the pairs it cannot answer. */
  #linksFromHot(hot: ViewHotState, pairs: readonly { dataSetId: string; identifier: string }[], out: Map<string, string>): { dataSetId: string; identifier: string }[] {
    return hot.answer(
      pairs,
      (dataSetId) =>
        hot.linksOf(
          dataSetId,
          (atMost) => this.#s.countLinks.get(dataSetId, atMost) as number,
          // As stored: the table takes a digest's bytes and a seq without decoding them.
          () => this.#s.allLinks.iterate(dataSetId) as IterableIterator<[StoredIdentifier, number | string]>,
        ),
      out,
    );
  }

  /** Lookups the hot state answered and passed on to the file, its size, and its full loads (tests; null without hot state). */
  hotStats(): HotStats | null {
    return this.#hot?.stats() ?? null;
  }

  async offset(consumer: string): Promise<number> {
    return (this.#s.offset.get(consumer) as number | undefined) ?? 1;
  }

  /** The file's fence (view-fence.ts): the last queue position its consumer may apply, or null. */
  async fence(): Promise<number | null> {
    return this.#fence.read();
  }

  async getRecord(dataSetId: string, recordKey: string): Promise<MergedRecord | null> {
    const row = this.#s.record.get(dataSetId, recordKey) as RecordRow | undefined;
    return row ? recordOf(row) : null;
  }

  /** Sharded layout: the identity key the identity stage last gave a record (resolve it), or null. */
  async recordIdentity(dataSetId: string, recordKey: string): Promise<string | null> {
    return (this.#s.recordIdentity.get(dataSetId, recordKey) as string | null | undefined) ?? null;
  }

  async resolveIdentity(dataSetId: string, identityKey: string): Promise<string | null> {
    const row = this.#s.node.get(dataSetId, identityKey) as NodeRow | undefined;
    if (!row) return null;
    return row.parent ?? row.identity_key;
  }

  async identityOfIdentifier(dataSetId: string, identifier: string): Promise<string | null> {
    const out = new Map<string, string>();
    this.#readLinks(dataSetId, [identifier], out);
    return out.get(pairKey(dataSetId, identifier)) ?? null;
  }

  /**
   * Reads the links of `identifiers` (sorted) into `out` (pair key → identity key): one statement for
   * those stored as digests, one for the others when there are any (identifier-link-columns.ts).
   */
  #readLinks(dataSetId: string, identifiers: readonly string[], out: Map<string, string>): void {
    const digests: string[] = [];
    let texts: string[] | null = null;
    for (const identifier of identifiers) {
      const hex = storedDigestHex(identifier);
      if (hex === null) (texts ??= []).push(identifier);
      else digests.push(hex);
    }
    const read = (rows: [StoredIdentifier, StoredIdentityKey][]) => {
      for (const [identifier, identityKey] of rows) out.set(pairKey(dataSetId, identifierOfStored(identifier)), identityKeyOfStored(identityKey));
    };
    if (digests.length > 0) read(this.#s.linksOfDigests.all(dataSetId, JSON.stringify(digests)) as [StoredIdentifier, StoredIdentityKey][]);
    if (texts !== null) read(this.#s.linksOfTexts.all(dataSetId, JSON.stringify(texts)) as [StoredIdentifier, StoredIdentityKey][]);
  }

  async getIdentity(dataSetId: string, identityKey: string): Promise<IdentityView | null> {
    // One read transaction, so the tree and the links are seen at one point in time.
    const read = this.#db.transaction((): IdentityView | null => {
      const asked = this.#s.node.get(dataSetId, identityKey) as NodeRow | undefined;
      if (!asked) return null;
      const rootKey = asked.parent ?? asked.identity_key;
      const root = (this.#s.node.get(dataSetId, rootKey) as NodeRow | undefined) ?? asked;
      const absorbed = this.#s.members.all(dataSetId, rootKey) as string[];
      const identifiers: string[] = [];
      for (const key of [rootKey, ...absorbed]) {
        for (const stored of this.#s.identifiersOf.all(dataSetId, storedIdentityKey(key)) as StoredIdentifier[]) identifiers.push(identifierOfStored(stored));
      }
      identifiers.sort();
      return {
        requestedKey: identityKey,
        identityKey: rootKey,
        dataSetId,
        eventCount: root.event_count,
        identifiers,
        absorbedKeys: absorbed,
      };
    });
    return read.deferred();
  }

  async exportRecords(dataSetId: string, sinceMs: number, onPage: (records: MergedRecord[]) => void | Promise<void>): Promise<void> {
    let after = 0;
    for (;;) {
      const rows = this.#s.exportPage.all(after, dataSetId, sinceMs) as RecordRow[];
      if (rows.length === 0) return;
      after = rows[rows.length - 1]!.rowid!;
      await onPage(rows.map(recordOf));
      if (rows.length < 1000) return;
    }
  }

  async counters(dataSetId: string, sinceHourMs: number): Promise<CounterRow[]> {
    return this.#s.counters.all(dataSetId, sinceHourMs) as CounterRow[];
  }

  async heartbeat(beat: ConsumerHeartbeat): Promise<void> {
    this.#s.heartbeat.run(beat.consumer, beat.pid, beat.at);
  }

  async lastHeartbeat(consumer: string): Promise<ConsumerHeartbeat | null> {
    return (this.#s.lastHeartbeat.get(consumer) as ConsumerHeartbeat | undefined) ?? null;
  }

  async close(): Promise<void> {
    if (this.#db.open) this.#db.close();
  }
}

/**
 * Ingest outcome counters. Flushes are tiny; the busy timeout is short because a flush runs on a
 * serving process's event loop: when the file is busy the flush fails fast and the counts wait in
 * memory for the next one.
 */
export class SqliteIngestStatsStore implements IngestStatsStore {
  readonly #db: Database.Database;
  readonly #add;
  readonly #counters;

  constructor(file: string, options: { busyTimeoutMs?: number } = {}) {
    this.#db = openDatabase(file, INGEST_STATS_SCHEMA, { busyTimeoutMs: options.busyTimeoutMs ?? 5000 });
    this.#add = this.#db.prepare(
      'INSERT INTO ingest_counters (data_set_id, hour, name, n) VALUES (?, ?, ?, ?) ON CONFLICT (data_set_id, hour, name) DO UPDATE SET n = n + excluded.n',
    );
    this.#counters = this.#db.prepare('SELECT hour, name, n FROM ingest_counters WHERE data_set_id = ? AND hour >= ?');
  }

  async add(deltas: readonly DataSetCounterDelta[]): Promise<void> {
    if (deltas.length === 0) return;
    this.#db.transaction(() => {
      for (const d of deltas) this.#add.run(d.dataSetId, d.hour, d.name, d.n);
    }).immediate();
  }

  async counters(dataSetId: string, sinceHourMs: number): Promise<CounterRow[]> {
    return this.#counters.all(dataSetId, sinceHourMs) as CounterRow[];
  }

  async close(): Promise<void> {
    if (this.#db.open) this.#db.close();
  }
}
