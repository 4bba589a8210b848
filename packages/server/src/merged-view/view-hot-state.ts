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
 * - An absent link is known only for a data set held **completely**: one that had no link at all
 *   when the state (re)started, and has lost no entry since (no eviction, no clear). Then every link
 *   of it was written by this consumer and remembered at its commit, and a miss is a true absence,
 *   answered without a lookup. Any other miss is read from the file. (A fixed-size filter could
 *   answer absences for any view, but it would have to be filled from the whole link table first.)
 * - Only committed state enters: the store adds what it read inside a transaction before any write
 *   of that transaction (the committed state, under the write lock), and what the transaction wrote
 *   only after its COMMIT. A batch that rolls back adds nothing of its own.
 *
 * Bound: at most `maxLinks` entries over all data sets of the partition (oldest first out, FIFO).
 * An entry costs ~150-200 bytes of V8 heap (a ~70-character identifier, the map slot, the identity
 * key string shared by the identity's links): the default 250,000 is ~40-50 MB per partition
 * thread (bench/README.md, issue 30, "Hot state").
 */

/** Links a partition's consumer keeps in memory by default (`ECAPI_VIEW_HOT_LINKS`). */
export const DEFAULT_HOT_LINKS = 250_000;

/** The hot-state bound from the environment (`ECAPI_VIEW_HOT_LINKS`, 0 turns it off), else the default. */
export function hotLinksFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.ECAPI_VIEW_HOT_LINKS;
  if (raw === undefined || raw.trim() === '') return DEFAULT_HOT_LINKS;
  const n = Number(raw);
  return Number.isSafeInteger(n) && n >= 0 ? n : DEFAULT_HOT_LINKS;
}

export class ViewHotState {
  readonly maxLinks: number;
  /** data set → identifier → identity key, oldest first. */
  readonly #links = new Map<string, Map<string, string>>();
  #count = 0;
  /** Data sets every link of which is in #links. */
  readonly #complete = new Set<string>();
  /** Data sets asked about since the last clear (whether they were empty was decided then). */
  readonly #seen = new Set<string>();
  /** Generation of the file the state is valid for, and the offset this consumer committed last. */
  generation = -1;
  committed: { consumer: string; nextSeq: number } | null = null;
  /** Lookups answered here (found, or known absent) and passed to the file, since the start. */
  hits = 0;
  misses = 0;

  constructor(maxLinks: number) {
    this.maxLinks = maxLinks;
  }

  get size(): number {
    return this.#count;
  }

  /** Forgets everything (the file changed under it). */
  clear(): void {
    this.#links.clear();
    this.#complete.clear();
    this.#seen.clear();
    this.#count = 0;
    this.committed = null;
  }

  /** Whether `dataSetId` was asked about since the last clear. */
  seen(dataSetId: string): boolean {
    return this.#seen.has(dataSetId);
  }

  /** First question about a data set since the last clear: `empty` says it has no link in the file. */
  see(dataSetId: string, empty: boolean): void {
    this.#seen.add(dataSetId);
    if (empty) this.#complete.add(dataSetId);
  }

  /** The links of a data set, and whether a miss there is a true absence. */
  linksOf(dataSetId: string): { readonly links: ReadonlyMap<string, string> | undefined; readonly complete: boolean } {
    return { links: this.#links.get(dataSetId), complete: this.#complete.has(dataSetId) };
  }

  /** Remembers a committed link. */
  addLink(dataSetId: string, identifier: string, identityKey: string): void {
    let links = this.#links.get(dataSetId);
    if (!links) this.#links.set(dataSetId, (links = new Map()));
    const before = links.size;
    links.set(identifier, identityKey);
    if (links.size === before) return;
    if (++this.#count > this.maxLinks) this.#evict(links, dataSetId);
  }

  /** Drops the oldest entries until the bound holds again: from `links` while it holds its share, else from the largest. */
  #evict(links: Map<string, string>, dataSetId: string): void {
    const excess = this.#count - this.maxLinks;
    let from = links;
    let fromDataSet = dataSetId;
    if (links.size <= this.maxLinks / this.#links.size) {
      for (const [ds, other] of this.#links) if (other.size > from.size) [from, fromDataSet] = [other, ds];
    }
    this.#complete.delete(fromDataSet);
    let dropped = 0;
    // Evict in chunks (1/64 of the bound), so that a full state does not pay one eviction per insert.
    const chunk = Math.max(excess, Math.ceil(this.maxLinks / 64));
    for (const key of from.keys()) {
      if (dropped >= chunk) break;
      from.delete(key);
      dropped++;
    }
    this.#count -= dropped;
  }
}
