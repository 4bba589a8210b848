/**
 * Hot state of one embedded view partition, kept in memory by its consumer across batches: the
 * identifier links it has read or written (identifier → identity key, per data set), so that a
 * batch's link lookups are answered without walking the link B-tree (issue 30: ~6.5 random lookups
 * per event were the largest item of one data set's profile). A PostgreSQL worker keeps one for all
 * its lanes (postgres-hot-links.ts), with its own validity checks around the same tables and bound;
 * what follows is the embedded store's use.
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
 * Bound: at most `maxLinks` links over all data sets of the partition. A data set's links are an
 * `IdentifierLinkTable` (identifier-link-table.ts): typed arrays off the V8 heap, ~52-56 bytes a
 * link (a JS Map of strings, before issue 30's third round, cost ~145 bytes of heap a link and a
 * large old generation for the GC to walk: 959 MB peak RSS at 1.2 million links). A data set whose
 * links pass the bound, or whose table gives up (a chain past its bound: hash flooding by a sender
 * that crafts identifiers), is dropped and read from the file as before.
 *
 * On by default (`worker --view-hot-links 2000000`): at ~52 bytes a link, a data set of a million
 * events of the benchmark's workload (1.08 million links) costs ~55 MB and saves ~15-20 µs of CPU
 * per event (bench/README.md, issue 30, "Compact hot links"); a small data set costs what its
 * links take (from 12 KiB); `--view-hot-links 0` turns it off.
 */
import { IdentifierLinkTable } from './identifier-link-table.js';
import { pairKey } from './view-store.js';

/**
 * Links a partition's consumer keeps in memory by default (`worker --view-hot-links`): 2,000,000,
 * ~105-115 MB at the bound (identifier-link-table.ts), enough for a data set of about two million
 * events of the benchmark's workload.
 */
export const DEFAULT_HOT_LINKS = 2_000_000;

/** Most links `worker --view-hot-links` accepts (~0.55 GB per partition thread at that). */
export const MAX_HOT_LINKS = 10_000_000;

/** A full load of one data set's links in progress (ViewHotState.startLoad): `add` answers false once it gave up. */
export interface LinkLoad {
  /** As IdentifierLinkTable.set takes them: text, or as a view file stores them. */
  add(identifier: string | Uint8Array, identityKey: string | number): boolean;
  finish(): IdentifierLinkTable | undefined;
}

/** What a store's hot links did since its start (`stats()`). */
export interface HotStats {
  readonly hits: number;
  readonly misses: number;
  readonly links: number;
  readonly loads: number;
  readonly loaded: number;
}

/**
 * What a full load of a data set's links reads: [identifier, identity key] rows, in any order, as
 * text or as the embedded view stores them (identifier-link-columns.ts).
 */
export type LinkRows = Iterable<readonly [string | Uint8Array, string | number]>;

export class ViewHotState {
  readonly maxLinks: number;
  /** data set → its links (every link of the data set: it is held completely). */
  readonly #links = new Map<string, IdentifierLinkTable>();
  #count = 0;
  /** Data sets asked about since the last clear that are not held (more links than the bound, or a table that gave up). */
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
  readonly #tableOptions: { maxProbe?: number };

  /** `tableOptions`: for tests (a short maxProbe makes a table give up). */
  constructor(maxLinks: number, tableOptions: { maxProbe?: number } = {}) {
    this.maxLinks = maxLinks;
    this.#tableOptions = tableOptions;
  }

  get size(): number {
    return this.#count;
  }

  /** Lookups answered here and passed on, links held, full loads and links read by them (tests, benchmarks). */
  stats(): HotStats {
    return { hits: this.hits, misses: this.misses, links: this.#count, loads: this.loads, loaded: this.loaded };
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
   * first question about a data set since the last clear counts its links (`count(atMost)`, see
   * `countBound`) and, if they fit the bound, reads them all from `scan()`; a data set with more
   * than the bound allows, or a link the table does not take, is not held.
   */
  linksOf(dataSetId: string, count: (atMost: number) => number, scan: () => LinkRows): IdentifierLinkTable | undefined {
    const known = this.heldLinks(dataSetId);
    if (known !== null) return known;
    const load = this.startLoad(dataSetId, count(this.countBound));
    if (load === undefined) return undefined;
    for (const [identifier, identityKey] of scan()) {
      if (!load.add(identifier, identityKey)) break; // leaves the scan (its statement is reset)
    }
    return load.finish();
  }

  /** A held data set's links; undefined when it is known not to be held; null when it has not been asked about since the last clear. */
  heldLinks(dataSetId: string): IdentifierLinkTable | undefined | null {
    const links = this.#links.get(dataSetId);
    if (links !== undefined || this.#notHeld.has(dataSetId)) return links;
    return null;
  }

  /**
   * Where a count of a data set's links may stop (the links `startLoad` would take, plus one): a
   * count of `min(links, countBound)` decides as the exact one does. So a data set far past the
   * bound, asked about again after every clear (each retention round that deletes links moves the
   * generation), costs a scan of at most the bound, not of all its links.
   */
  get countBound(): number {
    return Math.max(0, this.maxLinks - this.#count) + 1;
  }

  /**
   * Starts the full load of a data set that has `rows` links (or at least `countBound` when it has
   * that many; its rows then go to `add`, in any order, and `finish` holds it): undefined, and the
   * data set is not held, when they do not fit the bound. For a reader that fetches the rows itself
   * (the PostgreSQL store, in pages of a cursor).
   */
  startLoad(dataSetId: string, rows: number): LinkLoad | undefined {
    this.loads++;
    const limit = this.maxLinks - this.#count;
    if (rows > limit) {
      this.#notHeld.add(dataSetId);
      return undefined;
    }
    // Sized for what it loads, and a fifth more before it first grows.
    const table = new IdentifierLinkTable({ ...this.#tableOptions, capacity: Math.ceil(rows * 1.2) });
    let held = true;
    return {
      add: (identifier, identityKey) => (held &&= table.size < limit && table.set(identifier, identityKey)),
      finish: () => {
        // Another data set may have grown meanwhile (the PostgreSQL store's lanes load concurrently).
        if (!held || this.#count + table.size > this.maxLinks) {
          this.#notHeld.add(dataSetId);
          return undefined;
        }
        this.loaded += table.size;
        this.#links.set(dataSetId, table);
        this.#count += table.size;
        return table;
      },
    };
  }

  /** Forgets one data set, held or not: the next question about it loads it again. */
  drop(dataSetId: string): void {
    const links = this.#links.get(dataSetId);
    if (links !== undefined) {
      this.#count -= links.size;
      this.#links.delete(dataSetId);
    }
    this.#notHeld.delete(dataSetId);
  }

  /**
   * Answers `pairs` into `out` (identifier pair key → identity key) for the data sets `tableOf`
   * holds (a miss there is a true absence), counting hits and misses; returns the pairs it cannot
   * answer, for the store to read. `tableOf` is asked once per run of pairs of one data set.
   */
  answer<P extends { dataSetId: string; identifier: string }>(
    pairs: readonly P[],
    tableOf: (dataSetId: string) => IdentifierLinkTable | undefined,
    out: Map<string, string>,
  ): P[] {
    const asked: P[] = [];
    let lastDataSet: string | null = null;
    let links: IdentifierLinkTable | undefined;
    for (const p of pairs) {
      if (p.dataSetId !== lastDataSet) {
        lastDataSet = p.dataSetId;
        links = tableOf(p.dataSetId);
      }
      if (links === undefined) {
        asked.push(p);
        this.misses++;
        continue;
      }
      const key = links.get(p.identifier);
      if (key !== undefined) out.set(pairKey(p.dataSetId, p.identifier), key);
      this.hits++;
    }
    return asked;
  }

  /** Remembers a committed link of a held data set; a data set that outgrows the bound (or its table) is no longer held. */
  addLink(dataSetId: string, identifier: string, identityKey: string): void {
    const links = this.#links.get(dataSetId);
    if (links === undefined) return;
    const before = links.size;
    const taken = links.set(identifier, identityKey);
    if (taken && links.size === before) return;
    if (!taken || ++this.#count > this.maxLinks) {
      this.#count -= before + (taken ? 1 : 0);
      this.#links.delete(dataSetId);
      this.#notHeld.add(dataSetId);
    }
  }
}
