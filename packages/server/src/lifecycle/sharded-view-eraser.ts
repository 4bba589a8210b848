/**
 * Deletions in a sharded embedded view (consumer/identity-stage-applier.ts): one data set's records
 * in P record shards (by record key), its identities and each record's identity row in its identity
 * part; each file has its own consumer at its own queue offset, and its own SqliteViewEraser.
 *
 * Role: the ViewEraser of one data set for the lifecycle runner, as sqlite-view-eraser.ts is for a
 * data-set partition. What one file's transaction gives there, atomicity of a record with its
 * identity, takes two transactions here; what makes the result the one a single applier's view
 * would have:
 * - Hold (parts-fence.ts): before a request deletes, its data set's identity part and every shard
 *   are held at one queue position (`hold`), and released after its last view deletion. A held
 *   view is exactly one applier's view at that position, and nothing moves while it changes.
 * - Order, for a worker killed between two transactions. A request deletes a record's shard row
 *   first, then its identity row: its parts stay held across the restart (the fence names the
 *   request, lifecycle-runner.ts keeps it), and the next attempt finds the identity row left
 *   without its shard row and deletes it (a held view has no such row otherwise). Retention
 *   deletes the identity rows first, then the shard rows: its fences are released at a restart,
 *   and a shard row left behind is still expired at the next round, which deletes it (no queued
 *   event can still merge into an expired record: lifecycle-runner.ts, retention).
 * - Identity rows are dropped with their identity's record count (an identity left without a
 *   record goes with its links), as the single file's eraser does.
 * - `events delete`: the links only the deleted record carried (its identifiers linked to its
 *   identity, and the identity's links of replaceable kinds, that none of the identity's other
 *   records carries: sqlite-view-eraser.ts; their keys from the identity part,
 *   their events from the shards, all held) are dropped in the identity part before the shard row
 *   goes. A worker killed after that finds the record again and finds nothing left to drop; killed
 *   after the shard row went, it finds the links already dropped.
 *
 * Counts: a request's tally is kept in every file it touched (records and their event ids in the
 * shards, identities and links in the identity part) and summed here.
 */
import { recordShardOf } from '../merged-view/record-shard.js';
import { addCounts, identifiersOfStoredEvent, zeroCounts, type ErasedCounts, type IdentityToErase, type OldCopiesOptions, type ViewEraser, type ViewTally } from './lifecycle-backend.js';
import { holdPartsTogether, releaseParts } from './parts-fence.js';
import type { SqliteViewEraser } from './sqlite-view-eraser.js';

export class ShardedViewEraser implements ViewEraser {
  readonly #shards: readonly SqliteViewEraser[];
  readonly #identities: SqliteViewEraser;

  /** `shards`: every record shard of the view; `identities`: the data set's identity part. */
  constructor(shards: readonly SqliteViewEraser[], identities: SqliteViewEraser) {
    this.#shards = shards;
    this.#identities = identities;
  }

  get #parts(): SqliteViewEraser[] {
    return [...this.#shards, this.#identities];
  }

  #shardOf(dataSetId: string, recordKey: string): SqliteViewEraser {
    return this.#shards[recordShardOf(dataSetId, recordKey, this.#shards.length)]!;
  }

  /** The lowest offset of the data set's parts: every queued record below it is applied in all of them. */
  offset(): number {
    return Math.min(...this.#parts.map((part) => part.offset()));
  }

  async hold(holder: number, wait: () => Promise<void>): Promise<void> {
    await holdPartsTogether(this.#parts, holder, wait);
  }

  async release(): Promise<void> {
    await releaseParts(this.#parts);
  }

  findIdentity(dataSetId: string, target: { identifier: string } | { identityKey: string }): Promise<IdentityToErase | null> {
    return this.#identities.findIdentity(dataSetId, target);
  }

  /** Whether a shard has anything retention would delete (read only: a round that finds nothing holds nothing). */
  hasExpired(dataSetId: string, cutoffMs: number): boolean {
    return this.#shards.some((shard) => shard.expiredRows(dataSetId, cutoffMs, 1).length > 0);
  }

  async expire(dataSetId: string, cutoffMs: number, limit: number): Promise<ErasedCounts & { heldMs: number }> {
    const byShard = new Map<SqliteViewEraser, ReturnType<SqliteViewEraser['expiredRows']>>();
    let left = limit;
    for (const shard of this.#shards) {
      if (left === 0) break;
      const rows = shard.expiredRows(dataSetId, cutoffMs, left);
      if (rows.length > 0) byShard.set(shard, rows);
      left -= rows.length;
    }
    const keys = [...byShard.values()].flatMap((rows) => rows.map((row) => row.record_key));
    if (keys.length === 0) return { ...zeroCounts(), heldMs: 0 };
    // Identity rows first (see the top: a shard row left by a crash is found again next round).
    const counts = this.#identities.dropRecordIdentities(null, dataSetId, keys, true);
    let heldMs = counts.heldMs;
    for (const [shard, rows] of byShard) {
      const gone = shard.deleteRows(null, dataSetId, rows, Number.MAX_SAFE_INTEGER);
      counts.records += gone.keys.length;
      heldMs += gone.heldMs;
    }
    return { records: counts.records, identities: counts.identities, links: counts.links, heldMs };
  }

  async deleteRecord(requestId: number, dataSetId: string, recordKey: string, boundSeq: number): Promise<void> {
    const shard = this.#shardOf(dataSetId, recordKey);
    const [row] = shard.recordRows(dataSetId, [recordKey]);
    if (row && row.first_seq > boundSeq) return; // first queued after the request: not covered
    if (row) {
      const event = shard.recordEvent(dataSetId, recordKey);
      const root = event === undefined ? null : this.#identities.identityRootOfRecord(dataSetId, recordKey);
      if (event !== undefined && root !== null) {
        const identities = this.#identities;
        const shardOf = (key: string) => this.#shardOf(dataSetId, key);
        // Read only when one of its identifiers is linked to the identity (dropLinksOnlyIn).
        const remaining = function* (): Generator<string> {
          for (const key of identities.identityRecordKeys(dataSetId, root)) {
            if (key === recordKey) continue;
            const other = shardOf(key).recordEvent(dataSetId, key);
            if (other !== undefined) yield other; // an identity row without its shard row: a record being deleted
          }
        };
        identities.dropLinksOnlyIn(requestId, dataSetId, root, identifiersOfStoredEvent(event), remaining);
      }
      shard.deleteRows(requestId, dataSetId, [row], boundSeq);
    }
    // The shard row first; an identity row without one is this request's, from an attempt cut off.
    this.#identities.dropRecordIdentities(requestId, dataSetId, [recordKey], true);
  }

  /** The cursor is a record key of the identity part's record_identities ('' to start, or 0). */
  async deleteIdentityRecords(
    requestId: number,
    dataSetId: string,
    identity: { root: string; keys: ReadonlySet<string> },
    boundSeq: number,
    after: number | string,
    limit: number,
  ): Promise<{ next: string | null; deletedEventIds: string[] }> {
    const page = this.#identities.recordIdentityPage(dataSetId, typeof after === 'string' ? after : '', limit);
    const mine = page.filter((row) => row.identity_key !== null && identity.keys.has(row.identity_key)).map((row) => row.record_key);
    const byShard = new Map<SqliteViewEraser, string[]>();
    for (const key of mine) {
      const shard = this.#shardOf(dataSetId, key);
      const keys = byShard.get(shard);
      if (keys) keys.push(key);
      else byShard.set(shard, [key]);
    }
    const doomed: string[] = [];
    const deletedEventIds: string[] = [];
    for (const [shard, keys] of byShard) {
      const rows = shard.recordRows(dataSetId, keys);
      const found = new Set(rows.map((row) => row.record_key));
      // No shard row: an identity row this request's earlier attempt left (see the top).
      for (const key of keys) if (!found.has(key)) doomed.push(key);
      const gone = shard.deleteRows(requestId, dataSetId, rows.filter((row) => row.first_seq <= boundSeq), boundSeq);
      for (const key of gone.keys) {
        doomed.push(key);
        if (key.startsWith('id:')) deletedEventIds.push(key.slice(3));
      }
    }
    // The identity keeps count of its records: it goes (deleteIdentity) once none is left.
    if (doomed.length > 0) this.#identities.dropRecordIdentities(requestId, dataSetId, doomed, false);
    return { next: page.length < limit ? null : page[page.length - 1]!.record_key, deletedEventIds };
  }

  deleteIdentity(requestId: number, dataSetId: string, root: string): Promise<void> {
    return this.#identities.deleteIdentity(requestId, dataSetId, root);
  }

  async tally(requestId: number): Promise<ViewTally> {
    const sum = zeroCounts();
    let maxSeq = 0;
    const erased = [];
    for (const part of this.#parts) {
      const t = await part.tally(requestId);
      addCounts(sum, t);
      maxSeq = Math.max(maxSeq, t.maxSeq);
      erased.push(...t.erased);
    }
    return { ...sum, maxSeq, erased };
  }

  async clearTally(requestId: number): Promise<void> {
    for (const part of this.#parts) await part.clearTally(requestId);
  }

  async clearOldCopies(options: OldCopiesOptions = {}): Promise<boolean> {
    let all = true;
    for (const part of this.#parts) all = (await part.clearOldCopies(options)) && all;
    return all;
  }

  /** Records of the data set (in its shards) and the bytes of their events. */
  usage(dataSetId: string): { records: number; event_bytes: number } {
    const sum = { records: 0, event_bytes: 0 };
    for (const shard of this.#shards) {
      const u = shard.usage(dataSetId);
      sum.records += u.records;
      sum.event_bytes += u.event_bytes;
    }
    return sum;
  }
}
