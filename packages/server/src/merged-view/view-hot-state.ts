/**
 * Hot state of one embedded view partition, kept in memory by its consumer across batches: the
 * identifier links it has read or written (identifier → identity key, per data set), so that a
 * batch's link lookups are answered without walking the link B-tree (issue 30: ~6.5 random lookups
 * per event were the largest item of one data set's profile).
 *
 * What is exact, and why:
 * - A link, once written, never changes: the consumer links only identifiers that have no link
 *   (identity-forest.ts), and a union re-parents identity *nodes*, not links. Only the lifecycle's
 *   erasers delete links, and they bump the file's generation in the same transaction
 *   (view-generation.ts). So a remembered link is the stored one as long as the generation has not
 *   moved and no other consumer applied batches to the file (its offset is the one this consumer
 *   committed last). The store checks both once per batch, inside its write transaction (which no
 *   other writer can interleave), and clears everything when either moved.
 * - A data set is held **completely** or not at all: the first batch that asks about it after a
 *   start or a clear reads all its links (one scan of its part of the link index, ~3-4 µs per link),
 *   as long as they fit the bound; from then on every link this consumer commits is added. So a miss
 *   is a true absence, answered without a lookup (a first-seen identifier, ~1 in 5 lookups of the
 *   benchmark workload). A data set with more links than the bound is not held: its lookups go to
 *   the file as before. A partial (LRU) state was measured and did not pay: holding 100,000 of the
 *   benchmark's 216,667 links answered 39% of the lookups for no CPU gain, since every miss and
 *   every absence still walks the B-tree (bench/README.md, issue 30, "Hot state").
 * - Only committed state enters: the store adds what it read inside a transaction before any write
 *   of that transaction (the committed state, under the write lock), and what the transaction wrote
 *   only after its COMMIT. A batch that rolls back adds nothing of its own.
 *
 * Bound: at most `maxLinks` links over all data sets of the partition. A link costs ~145 bytes of
 * V8 heap (a ~70-character identifier, the map slot, the identity key string shared by the
 * identity's links; measured: 31 MB after GC for 216,667 links), and the old generation grows with
 * it, so a bound of 250,000 adds ~100-130 MB to the peak RSS of a partition thread that holds that
 * many (bench/README.md, issue 30, "Hot state").
 *
 * Off by default (`worker --view-hot-links 0`): the data sets it helps are those small enough to fit
 * the bound, which are rarely the ones whose CPU per event matters, while the memory is spent by
 * every node that runs `npm start`; a data set at the scale of issue 30 (a million events, ~1.08
 * million links) fits no practical bound as a JS Map (959 MB peak RSS at 1.2 million). An operator
 * with a mid-sized, busy data set and memory to spare turns it on (docs/guides/merged-view.md).
 */

/** Links a partition's consumer may keep in memory by default (`worker --view-hot-links`): none. */
export const DEFAULT_HOT_LINKS = 0;

/** Most links `worker --view-hot-links` accepts (~1.5 GB of heap per partition thread at that). */
export const MAX_HOT_LINKS = 10_000_000;

export class ViewHotState {
  readonly maxLinks: number;
  /** data set → identifier → identity key: every link of the data set (it is held completely). */
  readonly #links = new Map<string, Map<string, string>>();
  #count = 0;
  /** Data sets asked about since the last clear that are not held (more links than the bound). */
  readonly #notHeld = new Set<string>();
  /** Generation of the file the state is valid for, and the offset this consumer committed last. */
  generation = -1;
  committed: { consumer: string; nextSeq: number } | null = null;
  /** Lookups answered here (found, or known absent) and passed to the file, since the start. */
  hits = 0;
  misses = 0;
  /** Full loads of a data set's links (after a start or a clear), and links read by them. */
  loads = 0;
  loaded = 0;

  constructor(maxLinks: number) {
    this.maxLinks = maxLinks;
  }

  get size(): number {
    return this.#count;
  }

  /** Forgets everything (the file changed under it). */
  clear(): void {
    this.#links.clear();
    this.#notHeld.clear();
    this.#count = 0;
    this.committed = null;
  }

  /**
   * The links of a data set if it is held (a miss is then a true absence), else undefined. The
   * first question about a data set since the last clear loads all its links with `loadAll(limit)`,
   * which returns them, or null when there are more than `limit`.
   */
  linksOf(dataSetId: string, loadAll: (limit: number) => [string, string][] | null): ReadonlyMap<string, string> | undefined {
    const links = this.#links.get(dataSetId);
    if (links !== undefined || this.#notHeld.has(dataSetId)) return links;
    const rows = loadAll(this.maxLinks - this.#count);
    this.loads++;
    if (rows === null) {
      this.#notHeld.add(dataSetId);
      return undefined;
    }
    const held = new Map(rows);
    this.loaded += held.size;
    this.#links.set(dataSetId, held);
    this.#count += held.size;
    return held;
  }

  /** Remembers a committed link of a held data set; a data set that outgrows the bound is no longer held. */
  addLink(dataSetId: string, identifier: string, identityKey: string): void {
    const links = this.#links.get(dataSetId);
    if (links === undefined) return;
    const before = links.size;
    links.set(identifier, identityKey);
    if (links.size === before) return;
    if (++this.#count > this.maxLinks) {
      this.#count -= links.size;
      this.#links.delete(dataSetId);
      this.#notHeld.add(dataSetId);
    }
  }
}
