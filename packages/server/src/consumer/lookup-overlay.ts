/**
 * The reads of a batch answered, where it is exact, without the view file: from the state the
 * previous batch left (its records, identifier links and identity nodes, in memory), then from a
 * prefetch made by another thread while the previous batch was being applied
 * (batch-prefetch.ts), and only for what neither holds from the view transaction itself.
 *
 * Why the answer is the view's own (the invariant the consumer checks before using an overlay,
 * view-consumer.ts): let N be the previous batch and N+1 this one.
 * - `previous` is the state after N for every key N loaded or wrote: the records N wrote, the
 *   links N loaded or created, the nodes N loaded or created, all as N committed them.
 * - the prefetch read a snapshot taken after N-1 committed (its consumer offset is N's first or
 *   N+1's first sequence number), so for a key N did not touch it holds the value after N too: the
 *   consumer is the view file's only writer of these rows, and
 * - no other connection committed since N-1 (`PRAGMA data_version` of the consumer's connection
 *   unchanged at N's and at N+1's BEGIN: lifecycle's erasers and retention write through other
 *   connections, so anything they do makes the consumer read from the file again).
 * The one write of N that changes rows N did not load: re-parenting (every node whose parent was
 * absorbed now points to the survivor). A prefetched node whose parent N absorbed gets that
 * parent's new parent (N's nodes hold it; trees are flat).
 * A key neither holds (the prefetch did not ask for it: the batch's records differ from those it
 * read, or a record of N carries identifiers it did not know) is read from the transaction.
 *
 * Memory: one batch's state (`previous`) and one prefetch, each a few maps of the keys one batch
 * touches (~2,000 records, ~12,000 identifiers, their nodes): some 10-20 MB at the default batch
 * size, replaced every batch, never growing with the view.
 */
import { pairKey, type IdentityNode, type MergedRecord, type RecordRef, type ViewTransaction } from '../merged-view/view-store.js';
import type { ViewLookups } from './batch-loading.js';

/** What a batch leaves behind for the next one's overlay (view-applier.ts `keep`). */
export interface BatchState {
  /** Records the batch wrote, by pairKey(data set, record key). */
  readonly records: ReadonlyMap<string, MergedRecord>;
  /** Identity key by pairKey(data set, identifier): every link the batch loaded or created. */
  readonly links: ReadonlyMap<string, string>;
  /** Every identity node the batch loaded or created, as it left them. */
  readonly nodes: ReadonlyMap<string, IdentityNode>;
}

/** The reads of a batch made ahead of it (batch-prefetch.ts), and which keys were asked. */
export interface PrefetchedLookups {
  /** First sequence number of the batch the prefetch read. */
  readonly from: number;
  /** The consumer offset in the snapshot the lookups saw. */
  readonly offsetSeen: number;
  /** Every key asked for, with what was found (null: not in the view). One map per kind: one hash lookup per key. */
  readonly records: ReadonlyMap<string, MergedRecord | null>;
  readonly links: ReadonlyMap<string, string | null>;
  readonly nodes: ReadonlyMap<string, IdentityNode | null>;
}

/** How many keys of each kind came from memory (previous or prefetch) and from the file. */
export interface OverlayStats {
  fromPrevious: number;
  fromPrefetch: number;
  fromFile: number;
}

export class LookupOverlay implements ViewLookups {
  readonly #tx: ViewLookups;
  readonly #previous: BatchState | null;
  readonly #prefetched: PrefetchedLookups | null;
  readonly stats: OverlayStats = { fromPrevious: 0, fromPrefetch: 0, fromFile: 0 };

  constructor(tx: ViewTransaction | ViewLookups, previous: BatchState | null, prefetched: PrefetchedLookups | null) {
    this.#tx = tx;
    this.#previous = previous;
    this.#prefetched = prefetched;
  }

  async loadRecords(refs: readonly RecordRef[]): Promise<Map<string, MergedRecord>> {
    const out = new Map<string, MergedRecord>();
    const missing: RecordRef[] = [];
    for (const ref of refs) {
      const pk = pairKey(ref.dataSetId, ref.recordKey);
      const mine = this.#previous?.records.get(pk);
      if (mine !== undefined) {
        out.set(pk, mine);
        this.stats.fromPrevious++;
        continue;
      }
      const found = this.#prefetched?.records.get(pk);
      if (found === undefined) missing.push(ref);
      else {
        if (found !== null) out.set(pk, found);
        this.stats.fromPrefetch++;
      }
    }
    if (missing.length > 0) {
      this.stats.fromFile += missing.length;
      for (const [pk, record] of await this.#tx.loadRecords(missing)) out.set(pk, record);
    }
    return out;
  }

  async loadIdentifierLinks(pairs: readonly { dataSetId: string; identifier: string }[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    const missing: { dataSetId: string; identifier: string }[] = [];
    for (const pair of pairs) {
      const pk = pairKey(pair.dataSetId, pair.identifier);
      const mine = this.#previous?.links.get(pk);
      if (mine !== undefined) {
        out.set(pk, mine);
        this.stats.fromPrevious++;
        continue;
      }
      const found = this.#prefetched?.links.get(pk);
      if (found === undefined) missing.push(pair);
      else {
        if (found !== null) out.set(pk, found);
        this.stats.fromPrefetch++;
      }
    }
    if (missing.length > 0) {
      this.stats.fromFile += missing.length;
      for (const [pk, key] of await this.#tx.loadIdentifierLinks(missing)) out.set(pk, key);
    }
    return out;
  }

  async loadIdentities(pairs: readonly { dataSetId: string; identityKey: string }[]): Promise<Map<string, IdentityNode>> {
    const out = new Map<string, IdentityNode>();
    const missing: { dataSetId: string; identityKey: string }[] = [];
    for (const pair of pairs) {
      const pk = pairKey(pair.dataSetId, pair.identityKey);
      const mine = this.#previous?.nodes.get(pk);
      if (mine !== undefined) {
        out.set(pk, mine);
        this.stats.fromPrevious++;
        continue;
      }
      const found = this.#prefetched?.nodes.get(pk);
      if (found === undefined) missing.push(pair);
      else {
        if (found !== null) out.set(pk, this.#reparented(found));
        this.stats.fromPrefetch++;
      }
    }
    if (missing.length > 0) {
      this.stats.fromFile += missing.length;
      for (const [pk, node] of await this.#tx.loadIdentities(missing)) out.set(pk, node);
    }
    return out;
  }

  /** A prefetched node whose parent the previous batch absorbed points to the survivor, as the file now says. */
  #reparented(node: IdentityNode): IdentityNode {
    if (node.parent === null || !this.#previous) return node;
    const parent = this.#previous.nodes.get(pairKey(node.dataSetId, node.parent));
    return parent !== undefined && parent.parent !== null ? { ...node, parent: parent.parent } : node;
  }
}
