/**
 * The data lifecycle's storage, as the worker's runner (lifecycle-runner.ts) and the CLI see it:
 * deletion requests, suppressions and the audit log (LifecycleStore), deletions in the merged view
 * (ViewEraser) and erasure of queued events (QueueEraser). The embedded profile implements it over
 * lifecycle.db, the view partition files and queue.db (sqlite-*.ts); the scale-out profile over
 * tables of the environment's PostgreSQL schema (postgres-*.ts). `Storage.lifecycle()` picks.
 *
 * Every method that deletes is one short transaction of at most `limit` rows, so the consumer and
 * ingestion wait for at most one of them.
 */
import { identifiersOf, normalizeEvent } from '../merged-view/identity.js';

export type DeletionKind = 'forget_identifier' | 'forget_identity' | 'delete_event';

/** LifecycleStore.targetDigester: the target digest a request of `kind` on `value` would have. */
export type TargetDigester = (dataSetId: string, kind: DeletionKind, value: string) => string;

/**
 * A file or its write-ahead log that still holds deleted bytes could not be cleared yet (a reader
 * holds an older snapshot, fs/old-copies.ts): the request stays pending, its counts settled, and is
 * finished at a later round (the runner goes on with the other requests and retention meanwhile).
 */
export class WalBusyError extends Error {}

export interface DeletionResult {
  readonly view_records: number;
  readonly identities: number;
  readonly identifier_links: number;
  readonly queue_events: number;
  readonly suppressed_identifiers: number;
}

export interface DeletionRequest {
  readonly id: number;
  readonly dataSetId: string;
  readonly kind: DeletionKind;
  /** The identifier, identity key or event id; null once done (docs/guides/data-lifecycle.md). */
  readonly target: string | null;
  readonly targetDigest: string;
  readonly suppress: boolean;
  /** The queue's last sequence number when requested: queued copies up to it are erased. */
  readonly boundSeq: number;
  readonly actor: string;
  readonly requestedAt: number;
  readonly state: 'pending' | 'done';
  readonly doneAt: number | null;
  readonly result: DeletionResult | null;
}

export interface NewDeletionRequest {
  readonly dataSetId: string;
  readonly kind: DeletionKind;
  readonly target: string;
  readonly suppress: boolean;
  readonly boundSeq: number;
  readonly actor: string;
  readonly nowMs?: number;
}

/** The row shape both stores keep (snake case, as stored). */
export interface DeletionRequestRow {
  id: number | string;
  data_set_id: string;
  kind: DeletionKind;
  target: string | null;
  target_digest: string;
  suppress: number | boolean;
  bound_seq: number | string;
  actor: string;
  requested_at: number | string;
  state: 'pending' | 'done';
  done_at: number | string | null;
  result: string | null;
}

export const deletionRequestOf = (r: DeletionRequestRow): DeletionRequest => ({
  id: Number(r.id),
  dataSetId: r.data_set_id,
  kind: r.kind,
  target: r.target,
  targetDigest: r.target_digest,
  suppress: r.suppress === 1 || r.suppress === true,
  boundSeq: Number(r.bound_seq),
  actor: r.actor,
  requestedAt: Number(r.requested_at),
  state: r.state,
  doneAt: r.done_at === null ? null : Number(r.done_at),
  result: r.result === null ? null : (JSON.parse(r.result) as DeletionResult),
});

export interface LifecycleStore {
  /** Digest of a typed identifier of a data set under the store's key, in canonical form (identifier-digest.ts suppressionDigest). */
  digest(dataSetId: string, value: string): Promise<string>;
  request(input: NewDeletionRequest): Promise<DeletionRequest>;
  get(id: number): Promise<DeletionRequest | null>;
  pending(): Promise<DeletionRequest[]>;
  /** The audit log: every request, newest first (targets of done requests are cleared). */
  audit(dataSetId?: string, limit?: number): Promise<DeletionRequest[]>;
  /**
   * Requests with an id above `afterId`, oldest first, at most `limit`: how a reader follows the
   * requests as they are recorded (live/console-deletions.ts: the console's memory).
   */
  after(afterId: number, limit: number): Promise<DeletionRequest[]>;
  /**
   * `targetDigest` (identifier-digest.ts) under the store's key, as a synchronous function: what a
   * request's `targetDigest` would be for `value`, so that a reader compares values it holds with
   * requests whose target is already cleared (done), without the key leaving the store's module.
   */
  targetDigester(): Promise<TargetDigester>;
  /**
   * Claims a pending request for `forMs`, or renews this worker's claim (false when another live
   * worker holds it): with several workers (PostgreSQL) one carries a request out. A claim is taken
   * over at once when its owner is known dead (same host, its process gone: claim-owner.ts), else
   * when it lapsed (the owner renews it every step while it works).
   */
  claim(id: number, forMs: number): Promise<boolean>;
  /**
   * Stores a request's final counts while it stays pending: the deletions are over, what is left
   * is clearing tallies and truncating WALs; a worker that takes over finds the counts here.
   */
  settle(id: number, result: DeletionResult): Promise<void>;
  /** Adds digests to a data set's suppression list (idempotent); returns how many were new. */
  suppress(dataSetId: string, digests: readonly string[], requestId: number): Promise<number>;
  /**
   * Clears a request's target (the only clear identifier kept) and marks it done with its counts.
   * The embedded profile clears the target first and marks the request done only once lifecycle.db
   * and its WAL hold no older copy of it (fs/old-copies.ts); while a reader keeps them busy it throws
   * WalBusyError, the request stays pending with its counts settled, and the runner finishes it at a
   * later round.
   */
  complete(id: number, result: DeletionResult): Promise<void>;
  /**
   * Notes that a request deleted these event ids' records, as keyed digests (eventDigest), so that
   * `events get` can say a record was deleted without the ids being kept in clear (idempotent).
   */
  noteDeletedEvents(dataSetId: string, eventIds: readonly string[], requestId: number): Promise<void>;
  /** The request that deleted an event id's record (a noted one, or an `events delete` of it), or null. */
  deletedBy(dataSetId: string, eventId: string): Promise<DeletionRequest | null>;
  close(): Promise<void>;
}

export interface ErasedCounts {
  records: number;
  identities: number;
  links: number;
}

export const zeroCounts = (): ErasedCounts => ({ records: 0, identities: 0, links: 0 });

export function addCounts(into: ErasedCounts, more: ErasedCounts): void {
  into.records += more.records;
  into.identities += more.identities;
  into.links += more.links;
}

export interface IdentityToErase {
  readonly root: string;
  /** The root and every key it absorbed. */
  readonly keys: string[];
  readonly identifiers: string[];
}

/** Where deleteIdentityRecords goes on: 0 to start. */
export type EraserCursor = number | string;

/** Deletions in the merged view of one data set's partition. */
export interface ViewEraser {
  /** The identity (root and absorbed keys) and its identifiers, or null when unknown. */
  findIdentity(dataSetId: string, target: { identifier: string } | { identityKey: string }): Promise<IdentityToErase | null>;
  /**
   * Deletes up to `limit` records last updated before `cutoffMs` whose event's `timestamp` (whole
   * seconds, which may be up to 5 minutes ahead of its receipt) is more than a second before it too:
   * a re-send of that event is then refused as too old by a retention at least the maximum age
   * (identities left without a record go too). `heldMs`: how long the transaction held its write
   * lock (not counting the wait for it).
   */
  expire(dataSetId: string, cutoffMs: number, limit: number): Promise<ErasedCounts & { heldMs: number }>;
  /**
   * Deletes one record by its key (and its identity when it was the identity's last record), if its
   * first event was queued up to `boundSeq`; counted in the request's tally. An identity that keeps
   * other records loses, of its identifier links that no remaining record of it carries, those of
   * the deleted record's identifiers (identifiersOfStoredEvent) and those of replaceable kinds
   * (isReplaceableIdentifier: an earlier version of the deleted record may have brought a value a
   * re-send replaced), which would otherwise still resolve to it (counted in the tally's links).
   */
  deleteRecord(requestId: number, dataSetId: string, recordKey: string, boundSeq: number): Promise<void>;
  /**
   * Deletes the records of the identity (root and absorbed keys) first queued up to `boundSeq` among
   * the next `limit` records of the data set after `after` (a cursor: 0 to start), counted in the
   * request's tally in the same transaction. Returns where to go on, or null at the end, and the
   * event ids of the records it deleted (for LifecycleStore.noteDeletedEvents). The cursor is the
   * eraser's own (a rowid, or a record key in the sharded layout).
   */
  deleteIdentityRecords(
    requestId: number,
    dataSetId: string,
    identity: { root: string; keys: ReadonlySet<string> },
    boundSeq: number,
    after: EraserCursor,
    limit: number,
  ): Promise<{ next: EraserCursor | null; deletedEventIds?: string[] }>;
  /**
   * The sharded layout (sharded-view-eraser.ts): holds the data set's parts at one queue position
   * for `holder` (a request's id, 0: retention), calling `wait` until they are there, and lets them
   * go. Absent where one lane applies a data set's records and identities (the data-set layout).
   */
  hold?(holder: number, wait: () => Promise<void>): Promise<void>;
  release?(): Promise<void>;
  /**
   * Lets go of what this process holds for a hold (PostgreSQL: the partition's lock and its
   * connection) but not of the fences: the end of a request's attempt, finished or cut off.
   */
  detach?(): Promise<void>;
  /** Whether retention has anything to delete (the sharded layout asks before holding its parts). */
  hasExpired?(dataSetId: string, cutoffMs: number): boolean | Promise<boolean>;
  /** Deletes an identity tree (nodes and links) once no record of it is left (else keeps it). */
  deleteIdentity(requestId: number, dataSetId: string, root: string): Promise<void>;
  /** What the request deleted so far, over every attempt (a worker killed mid-way included). */
  tally(requestId: number): Promise<ViewTally>;
  /** Forgets the tally (it names straddling event ids) once the result is stored. */
  clearTally(requestId: number): Promise<void>;
  /**
   * Leaves no old copy of deleted rows where the store keeps them: embedded, the b-tree pages'
   * unallocated space is zeroed and the WAL copied back and truncated (fs/old-copies.ts; true when
   * both were done, false when busy); PostgreSQL, a VACUUM of the touched tables. With `scrub:
   * false`, the cheap half only (embedded: the WAL; PostgreSQL: nothing): what a retention round
   * does between two whole clearings (fs/old-copies-schedule.ts).
   */
  clearOldCopies(options?: OldCopiesOptions): Promise<boolean>;
  /**
   * Names what clearOldCopies clears, where erasers of several data sets clear the same thing
   * (PostgreSQL: the view's tables), so that it is cleared once for all of them; absent: the eraser
   * object itself (embedded: one per file, kept for the process's life).
   */
  readonly oldCopiesScope?: string;
}

/** What clearOldCopies does: everything (default), or with `scrub: false` the cheap half only. */
export interface OldCopiesOptions {
  readonly scrub?: boolean;
}

/**
 * A record a request deleted, as the queue's erasure needs it: its event id and the last queue
 * position merged into it. The queued copies with that id are erased up to the bound, and after it
 * up to `lastSeq` (re-sends merged into the record after the bound, "straddlers"), so that view and
 * queue agree; a copy queued after `lastSeq` was not in the record and is kept (it starts a new
 * record once the consumer applies it).
 */
export interface ErasedRecord {
  readonly eventId: string;
  readonly lastSeq: number;
}

/** An ErasedRecord as both stores keep it in a request's tally: one string, so that tallies merge as sets. */
export const erasedRecordEntry = (record: ErasedRecord): string => `${record.lastSeq} ${record.eventId}`;

/** The ErasedRecord of a tally entry (erasedRecordEntry). */
export function erasedRecordOf(entry: string): ErasedRecord {
  const space = entry.indexOf(' ');
  return { lastSeq: Number(entry.slice(0, space)), eventId: entry.slice(space + 1) };
}

/**
 * A request's deletions in the view: counts, and every deleted record that had an event id (its
 * queued copies are erased with it), the highest `lastSeq` of them in `maxSeq` (0: none).
 */
export interface ViewTally extends ErasedCounts {
  readonly maxSeq: number;
  readonly erased: readonly ErasedRecord[];
}

/**
 * The erasure of one decoded segment, for both QueueErasers: every event `match(event, seq)` selects
 * (seq = `firstSeq` + its index) becomes null in place. Returns how many did.
 */
export function eraseMatchingEvents(
  events: (Record<string, unknown> | null)[],
  firstSeq: number,
  match: (event: Record<string, unknown>, seq: number) => boolean,
): number {
  let changed = 0;
  for (let i = 0; i < events.length; i++) {
    const event = events[i];
    if (event !== null && event !== undefined && match(event, firstSeq + i)) {
      events[i] = null;
      changed++;
    }
  }
  return changed;
}

/**
 * The identifiers of a stored merged event (view_records.event, JSON) as the consumer links them
 * (merged-view/identity.ts: normalized, then read). `events delete` uses it for the deleted record
 * (the links it may have carried alone) and for the identity's remaining records (those they carry).
 */
export function identifiersOfStoredEvent(eventJson: string): string[] {
  return identifiersOf(normalizeEvent(JSON.parse(eventJson) as never));
}

/**
 * Whether an identifier is of a kind a merged re-send can replace: `user_data.customer_identifier`
 * (`cid:`) and `user_data.ifa` (`ifa:`) are scalars, which the merge rule replaces (merge.ts), while
 * the identifier arrays (emails, phones, uids) union, so their elements stay in the record. The link
 * of a replaced value stays with the identity though no record carries it any more: `events delete`
 * cannot tell whether an earlier version of the deleted record brought it, so it drops every link of
 * these kinds that no remaining record of the identity carries (lifecycle/DESIGN.md).
 */
export function isReplaceableIdentifier(identifier: string): boolean {
  return identifier.startsWith('cid:') || identifier.startsWith('ifa:');
}

/**
 * The per-event policy metas of a segment (its `metas` column: a JSON array parallel to the events,
 * or NULL) with the entry of every erased event (null in `events`) null too: a meta can hold what
 * the sender sent (a redacted path names the property key it was under, `properties["a@b.c"]`), so
 * it goes with its event, in the same UPDATE. Every null event counts, not only those erased now: a
 * segment erased before metas were (a file of an older version) is cleaned when a later request
 * passes over it. Returns the new column value (NULL when no entry is left), or `undefined` when
 * nothing changed.
 */
export function eraseMetasOf(metasJson: string | null, events: readonly (Record<string, unknown> | null)[]): string | null | undefined {
  if (metasJson === null) return undefined;
  const metas = JSON.parse(metasJson) as unknown[];
  let changed = false;
  for (let i = 0; i < metas.length; i++) {
    if (metas[i] !== null && metas[i] !== undefined && (events[i] === null || events[i] === undefined)) {
      metas[i] = null;
      changed = true;
    }
  }
  if (!changed) return undefined;
  return metas.some((meta) => meta !== null && meta !== undefined) ? JSON.stringify(metas) : null;
}

/** Erasure of queued events (an erased event becomes null in its segment; readers skip it). */
export interface QueueEraser {
  /**
   * Erases the matching events (`match(event, seq)`) of the data set in the next `limit` segments
   * with first_seq in (afterSeq, upToSeq], counted in the request's tally in the same transaction.
   * Returns where to go on (null at the end).
   */
  erase(
    requestId: number,
    dataSetId: string,
    upToSeq: number,
    afterSeq: number,
    limit: number,
    match: (event: Record<string, unknown>, seq: number) => boolean,
  ): Promise<{ next: number | null }>;
  /** Events the request erased so far, over every attempt. */
  tally(requestId: number): Promise<number>;
  clearTally(requestId: number): Promise<void>;
  /**
   * Overwrites with zeros and syncs every body-log range an erasure left unreferenced at least a
   * grace period ago (embedded; waits for it when `wait`); returns bytes overwritten.
   */
  overwritePending(options?: { wait?: boolean }): Promise<number>;
  /** As ViewEraser.clearOldCopies, for the queue (embedded: queue.db; PostgreSQL: VACUUM). */
  clearOldCopies(): Promise<boolean>;
}

/** Bytes per store; `body_log` is 0 on PostgreSQL (no body log). */
export interface StoreBytes {
  readonly queue: number;
  readonly body_log: number;
  readonly view: number;
  readonly control: number;
  readonly lifecycle: number;
  readonly ingest_stats: number;
}

export interface LifecycleBackend {
  readonly store: LifecycleStore;
  readonly queue: QueueEraser;
  /** Whether the consumer has applied every queued record of the data set up to `boundSeq`. */
  applied(dataSetId: string, boundSeq: number): Promise<boolean>;
  /**
   * The time up to which the consumer has applied the data set's queue: `nowMs` when it has applied
   * every queued record of its partition, else the receipt time of the first it has not (view
   * retention counts from it, so that a record never expires while an event that could still merge
   * into it waits in the queue).
   */
  appliedThrough(dataSetId: string, nowMs: number): Promise<number>;
  /** Bytes each store takes (embedded: its files with their WAL; PostgreSQL: its tables with indexes and TOAST). */
  storeBytes(): Promise<StoreBytes>;
  /** Free bytes where deletions write (embedded: the environment's directory), or null when not ours to watch (PostgreSQL). */
  freeBytes(): Promise<number | null>;
  /** Records of a data set in the merged view and the bytes of their events (a scan of the data set's records). */
  dataSetUsage(dataSetId: string): Promise<{ records: number; event_bytes: number }>;
  /** The view eraser of the data set's partition, or null while the view does not exist yet. */
  viewEraser(dataSetId: string): Promise<ViewEraser | null>;
  /**
   * The sharded layout, at every lifecycle round: lets go of the parts a killed worker (or an attempt
   * cut off) held, except those held by a request still `pending` (its next attempt holds them again
   * at the same position) and, on PostgreSQL, those a live worker is holding now.
   */
  releaseStaleHolds?(pending: ReadonlySet<number>): Promise<void>;
  close(): Promise<void>;
}

/**
 * How often consumers of versions before the check under the write lock looked for a changed
 * suppression list (at most; before a batch). The runner still waits twice this long after storing a
 * suppression before its view deletions, for such consumers while versions are mixed during an
 * upgrade; consumers of this version need no wait (consumer/view-consumer.ts).
 */
export const SUPPRESSION_REFRESH_MS = 500;

/**
 * What a consumer checks before applying a record (view-applier.ts `ApplyOptions.suppressions`): digests by data
 * set, reloaded by `refresh` when the store's version moved; the consumer refreshes under the view's
 * write lock before every batch (view-consumer.ts).
 */
export interface SuppressionFilter {
  refresh(): Promise<void> | void;
  suppressed(dataSetId: string, identifiers: readonly string[]): boolean;
}
