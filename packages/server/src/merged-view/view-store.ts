/**
 * Storage of the asynchronous side, as the consumer and the CLI see it. Nothing here knows about
 * SQLite: the embedded implementation is `sqlite-view-store.ts`; a PostgreSQL one implements the
 * same interfaces.
 *
 * The write side is batch-shaped on purpose: the consumer loads everything a batch of queue
 * records touches with a few bulk reads, computes the new state in memory, and writes it back with
 * a few bulk writes plus the new consumer offset, all in ONE transaction. That transaction is what
 * makes at-least-once delivery exactly-once in effect: a batch is applied and its offset advanced
 * together, or neither happens. (With a network database, it is also a handful of round trips per
 * batch rather than several per event.)
 */
import type { CounterRow } from '../model/hourly-counters.js';
import type { JsonObject } from './merge.js';
import type { ConsumerWorkers } from './postgres-consumer-workers.js';

/** One record of the merged view. */
export interface MergedRecord {
  readonly dataSetId: string;
  /** `id:<id>`, or `seq:<seq>` for an event without an id. */
  readonly recordKey: string;
  readonly eventId: string | null;
  /** Queue position of the first and of the latest record merged into this one. */
  readonly firstSeq: number;
  readonly lastSeq: number;
  /** received_at (ms) of the first and of the latest merged record. */
  readonly firstReceivedAt: number;
  readonly lastReceivedAt: number;
  /** How many queued records were merged into this one (1 for a record seen once). */
  readonly mergedCount: number;
  /** The identity key assigned when last written; resolve it (it may have been absorbed since). */
  readonly identityKey: string | null;
  readonly measurementOnly: boolean;
  readonly event: JsonObject;
}

/** A node of the persisted union-find of identities. Trees are kept flat: parent is a root or null. */
export interface IdentityNode {
  readonly dataSetId: string;
  readonly identityKey: string;
  /** Null for a root (a live identity); else the key of the identity that absorbed this one. */
  readonly parent: string | null;
  /** Queue position of the record that created the identity: the older identity survives a union. */
  readonly createdSeq: number;
  /** Distinct merged records in the identity (meaningful on roots). */
  readonly eventCount: number;
  /** Identifiers linked to the identity (meaningful on roots). */
  readonly identifierCount: number;
}

export interface RecordRef {
  readonly dataSetId: string;
  readonly recordKey: string;
}

export interface IdentifierLink {
  readonly dataSetId: string;
  readonly identifier: string;
  readonly identityKey: string;
}

/**
 * The identity stage's row of one merged record in the sharded layout (consumer/identity-stage-applier.ts):
 * what the stage needs to decide the merge window and the record's previous identity on its own.
 */
export interface RecordIdentity {
  readonly dataSetId: string;
  readonly recordKey: string;
  /** The record's first_received_at, as its record shard has it. */
  readonly firstReceivedAt: number;
  /** The identity key assigned when last written (resolve it), or null: no identity. */
  readonly identityKey: string | null;
}

export interface DataSetCounterDelta extends CounterRow {
  readonly dataSetId: string;
}

/** Map key for (data set, key) pairs. */
export const pairKey = (dataSetId: string, key: string) => `${dataSetId}\u0000${key}`;

/** Operations available inside one write transaction of the view. */
export interface ViewTransaction {
  /** The next queue sequence number the consumer must apply (1 on a fresh store). */
  offset(consumer: string): Promise<number>;
  setOffset(consumer: string, nextSeq: number): Promise<void>;
  /**
   * The last queue position this view's consumer may apply while the lifecycle holds the parts of a
   * sharded view at one position (view-fence.ts), or null; absent: never fenced.
   */
  fence?(): Promise<number | null>;
  /** Existing records by pairKey(dataSetId, recordKey). */
  loadRecords(refs: readonly RecordRef[]): Promise<Map<string, MergedRecord>>;
  /** Identity key each known identifier links to, by pairKey(dataSetId, identifier). */
  loadIdentifierLinks(pairs: readonly { dataSetId: string; identifier: string }[]): Promise<Map<string, string>>;
  /** Identity nodes by pairKey(dataSetId, identityKey). */
  loadIdentities(pairs: readonly { dataSetId: string; identityKey: string }[]): Promise<Map<string, IdentityNode>>;
  /** Inserts or replaces records (keyed by data set and record key). */
  writeRecords(records: readonly MergedRecord[]): Promise<void>;
  /** Inserts or replaces identity nodes. */
  writeIdentities(nodes: readonly IdentityNode[]): Promise<void>;
  /** Every node whose parent is `from` gets parent `to` (keeps trees flat after a union). */
  reparentIdentities(moves: readonly { dataSetId: string; from: string; to: string }[]): Promise<void>;
  /** Links new identifiers to identity keys. */
  linkIdentifiers(links: readonly IdentifierLink[]): Promise<void>;
  /** Adds deltas to the merged-view counters. */
  addCounters(deltas: readonly DataSetCounterDelta[]): Promise<void>;
  /** Sharded layout, identity stage: record rows by pairKey(dataSetId, recordKey) (embedded store only so far). */
  loadRecordIdentities?(refs: readonly RecordRef[]): Promise<Map<string, RecordIdentity>>;
  /** Sharded layout, identity stage: inserts or replaces record rows. */
  writeRecordIdentities?(rows: readonly RecordIdentity[]): Promise<void>;
}

export interface IdentityView {
  /** The key asked for. */
  readonly requestedKey: string;
  /** The live identity it resolves to (the same key unless it was absorbed by a union). */
  readonly identityKey: string;
  readonly dataSetId: string;
  readonly eventCount: number;
  readonly identifiers: string[];
  /** Keys absorbed into this identity. */
  readonly absorbedKeys: string[];
}

export interface ConsumerHeartbeat {
  readonly consumer: string;
  readonly pid: number;
  readonly at: number;
}

export interface ViewLayoutInfo {
  readonly partitions: number;
  readonly kind: 'data-sets' | 'sharded';
}

/** The merged view, identities, view counters and the consumer offset. */
export interface ViewStore {
  /** Runs `work` in one write transaction: commits when it resolves, rolls back when it throws. */
  transaction<T>(work: (tx: ViewTransaction) => Promise<T>): Promise<T>;
  offset(consumer: string): Promise<number>;
  /** As ViewTransaction `fence`, outside a transaction (a cheap check before reading the queue). */
  fence?(): Promise<number | null>;
  getRecord(dataSetId: string, recordKey: string): Promise<MergedRecord | null>;
  /** Root identity key of `identityKey`, or null when unknown. */
  resolveIdentity(dataSetId: string, identityKey: string): Promise<string | null>;
  getIdentity(dataSetId: string, identityKey: string): Promise<IdentityView | null>;
  /** The identity key an identifier (`type:value`, normalized) links to, or null (`identities get --identifier`). */
  identityOfIdentifier(dataSetId: string, identifier: string): Promise<string | null>;
  /** Records whose last_received_at >= sinceMs, in order of first arrival, page by page. */
  exportRecords(dataSetId: string, sinceMs: number, onPage: (records: MergedRecord[]) => void | Promise<void>): Promise<void>;
  /** Merged-view counter rows of a data set from the hour `sinceHourMs` on. */
  counters(dataSetId: string, sinceHourMs: number): Promise<CounterRow[]>;
  /**
   * How the view is split (embedded: into files, sqlite-view-layout.ts, `partitions` files of each
   * kind; PostgreSQL: into lanes, postgres-view-layout.ts, `partitions` the record shards per queue
   * partition, or the 16 queue partitions in the data-set layout), or null before it is first consumed.
   */
  layout?(): ViewLayoutInfo | null | Promise<ViewLayoutInfo | null>;
  /** The consumer's workers and the lanes each holds (PostgreSQL, postgres-consumer-workers.ts; absent where one consumer holds every partition). */
  workers?(): Promise<ConsumerWorkers>;
  /** Liveness of a running consumer (outside the view's state, never part of a batch). */
  heartbeat(beat: ConsumerHeartbeat): Promise<void>;
  lastHeartbeat(consumer: string): Promise<ConsumerHeartbeat | null>;
  close(): Promise<void>;
}

/** Ingest outcomes (accepted, rejected by reason), written by the serving processes. */
export interface IngestStatsStore {
  add(deltas: readonly DataSetCounterDelta[]): Promise<void>;
  counters(dataSetId: string, sinceHourMs: number): Promise<CounterRow[]>;
  close(): Promise<void>;
}
