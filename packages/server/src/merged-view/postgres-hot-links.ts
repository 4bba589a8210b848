/**
 * Hot identifier links of one PostgreSQL `worker` process: the links of the data sets its lanes
 * apply, kept in memory across batches (the embedded store's hot state, view-hot-state.ts, whose
 * tables and bound this reuses), so that a batch's ~6.5 link lookups per event are answered without
 * a statement. Issue 30: on PostgreSQL those lookups were ~15 µs of the server's CPU per event, plus
 * the worker's parameter arrays and rows (bench/README.md, "Hot links on PostgreSQL").
 *
 * One instance per worker, shared by all its lanes (consumer/postgres-partitions.ts): the bound
 * (`worker --view-hot-links`) is the process's, whatever the number of partitions it leases. A
 * data set's links are written by one lane only (its queue partition's data-set lane, or in the
 * sharded layout its identity part: a record shard never reads or writes links), so the lanes'
 * concurrent transactions never meet on a data set here.
 *
 * What is exact, and why (the embedded store's argument, with PostgreSQL's concurrency):
 * - A link never changes once written (identity-forest.ts); only the lifecycle's eraser deletes
 *   links, and it bumps the data set's generation in the same transaction
 *   (postgres-view-generation.ts). Each batch reads the generations of its data sets before it
 *   answers anything; a data set whose generation moved since it was loaded is dropped and loaded
 *   again. An erasure that commits after that read is one the batch could equally have missed with
 *   its own SELECT (READ COMMITTED): the next batch sees the bump.
 * - Another worker may have applied the lane's batches (a lease that moved and came back). A lane's
 *   batch locks its offset row first; if the offset is not the one this process last committed (or
 *   loaded at), every data set the lane holds is dropped: checked when the batch asks, and again
 *   when it commits (a batch that asked nothing must not vouch for the lane at its new offset).
 * - A full load reads the data set's links through a cursor, which sees one snapshot from its
 *   DECLARE (taken after the generation read, so a later erasure is caught by the next batch), in
 *   pages of LOAD_PAGE rows: no moment holds a million rows on the heap.
 * - Only committed state enters: loads happen before the batch writes anything (a batch that wrote
 *   reads from the database), and what the batch linked is added after its COMMIT. A batch that
 *   rolls back adds nothing.
 */
import type { PoolClient } from '../postgres/database.js';
import { readViewGenerations } from './postgres-view-generation.js';
import { ViewHotState } from './view-hot-state.js';
import type { IdentifierLinkTable } from './identifier-link-table.js';
import type { IdentifierLink } from './view-store.js';

/** Rows a full load fetches per round trip. */
const LOAD_PAGE = 20_000;

type LinkPair = { dataSetId: string; identifier: string };

/** What one batch transaction did that the hot links need (postgres-view-store.ts fills it). */
export interface HotBatch {
  /** The lane's offset row name and the offset read under its lock, once `offset()` ran. */
  lane: string | null;
  nextSeq: number;
  /** The batch wrote something: its reads no longer show the committed state alone. */
  wrote: boolean;
  /** Links it wrote, and the offset it set. */
  readonly links: IdentifierLink[];
  committedSeq: number | null;
}

export function newHotBatch(): HotBatch {
  return { lane: null, nextSeq: 0, wrote: false, links: [], committedSeq: null };
}

export class PostgresHotLinks {
  readonly state: ViewHotState;
  /** Data set → the lane that loaded it and the generation it was loaded at (held or known not to be). */
  readonly #loadedAt = new Map<string, { lane: string; generation: number }>();
  /** Lane → the offset its held data sets are exact at. */
  readonly #laneAt = new Map<string, number>();

  /** `tableOptions`: for tests (a short maxProbe makes a table give up). */
  constructor(maxLinks: number, tableOptions: { maxProbe?: number } = {}) {
    this.state = new ViewHotState(maxLinks, tableOptions);
  }

  /**
   * Answers `pairs` into `out` for the data sets held, loading the ones not yet asked about; returns
   * the pairs left for a SELECT. Inside `batch`'s transaction, after `offset()` and before any write.
   */
  async answer<P extends LinkPair>(db: PoolClient, batch: HotBatch, pairs: readonly P[], out: Map<string, string>): Promise<P[]> {
    const lane = batch.lane!;
    this.#checkLane(lane, batch.nextSeq);
    const dataSets = [...new Set(pairs.map((p) => p.dataSetId))];
    const generations = await readViewGenerations(db, dataSets);
    const tables = new Map<string, IdentifierLinkTable | undefined>();
    for (const dataSetId of dataSets) {
      const generation = generations.get(dataSetId)!;
      const at = this.#loadedAt.get(dataSetId);
      if (at !== undefined && (at.lane !== lane || at.generation !== generation)) this.#drop(dataSetId);
      let table = this.state.heldLinks(dataSetId);
      if (table === null) {
        this.#loadedAt.set(dataSetId, { lane, generation });
        table = await this.#load(db, dataSetId);
      }
      tables.set(dataSetId, table);
    }
    return this.state.answer(pairs, (dataSetId) => tables.get(dataSetId), out);
  }

  /** After `batch` committed: its links join the data sets its lane holds, and the lane is exact at its new offset. */
  committed(batch: HotBatch): void {
    if (batch.lane === null || !batch.wrote) return;
    const lane = batch.lane;
    // A batch that asked nothing (its records all suppressed, say) did not check its lane in `answer`:
    // what this process remembers of the lane must still be exact at the offset the batch started
    // from, or another worker applied batches in between and none of it may be vouched for.
    this.#checkLane(lane, batch.nextSeq);
    if (batch.committedSeq === null) {
      // Wrote without moving its offset (not a consumer batch): nothing to vouch for.
      this.#dropLane(lane);
      this.#laneAt.delete(lane);
      return;
    }
    for (const l of batch.links) {
      if (this.#loadedAt.get(l.dataSetId)?.lane === lane) this.state.addLink(l.dataSetId, l.identifier, l.identityKey);
      else this.#drop(l.dataSetId);
    }
    this.#laneAt.set(lane, batch.committedSeq);
  }

  /** Drops the lane's data sets unless what this process holds of it is exact at `nextSeq`; then it is. */
  #checkLane(lane: string, nextSeq: number): void {
    if (this.#laneAt.get(lane) === nextSeq) return;
    this.#dropLane(lane);
    this.#laneAt.set(lane, nextSeq);
  }

  #dropLane(lane: string): void {
    for (const [dataSetId, at] of this.#loadedAt) if (at.lane === lane) this.#drop(dataSetId);
  }

  #drop(dataSetId: string): void {
    this.state.drop(dataSetId);
    this.#loadedAt.delete(dataSetId);
  }

  async #load(db: PoolClient, dataSetId: string): Promise<IdentifierLinkTable | undefined> {
    // At most ViewHotState.countBound: a data set far past the bound is not counted whole.
    const { rows } = await db.query<{ n: string }>(
      'SELECT count(*) AS n FROM (SELECT 1 FROM identity_identifiers WHERE data_set_id = $1 LIMIT $2) AS links',
      [dataSetId, this.state.countBound],
    );
    const load = this.state.startLoad(dataSetId, Number(rows[0]!.n));
    if (load === undefined) return undefined;
    await db.query('DECLARE ecapi_hot_links NO SCROLL CURSOR FOR SELECT identifier, identity_key FROM identity_identifiers WHERE data_set_id = $1', [dataSetId]);
    try {
      for (let more = true; more; ) {
        const page = await db.query<[string, string]>({ text: `FETCH ${LOAD_PAGE} FROM ecapi_hot_links`, rowMode: 'array' });
        for (const [identifier, identityKey] of page.rows) {
          if (!load.add(identifier, identityKey)) return load.finish();
        }
        more = page.rows.length === LOAD_PAGE;
      }
      return load.finish();
    } finally {
      await db.query('CLOSE ecapi_hot_links');
    }
  }
}
