/**
 * When retention's deletions are followed by the expensive half of clearing old copies.
 *
 * Clearing old copies has two halves of very different cost (fs/old-copies.ts):
 * - the WAL's old page images: a checkpoint and a truncation, cheap; done after every retention
 *   round that deleted rows, as before;
 * - the b-tree pages' unallocated space (the page-gap scrub, fs/page-gap-scrub.ts), or on PostgreSQL
 *   a VACUUM of the touched tables: a read of the whole file (twice) or of the tables and their
 *   indexes, and on SQLite a hold of the write lock of about 0.23 s per GB. Retention deletes rows
 *   at nearly every round once a store is full (every minute by default), so doing this half at
 *   every round would read every file whole every minute and stall ingestion as often.
 * So after retention it runs at most once per `everyMs` per store (`worker --old-copies-every`,
 * default 15 min): what retention deleted leaves no byte within that time of the round that
 * deleted it, instead of at the end of the round. A try that does not complete (busy, or the
 * whole-file sweep past its time) waits the interval again rather than being tried at every tick.
 * With `everyMs` 0, every round (the tests of the documented bounds). Deletion requests do not go
 * through this: each clears everything before it is marked done.
 */
export const DEFAULT_OLD_COPIES_EVERY_MS = 15 * 60_000;

export class OldCopiesSchedule {
  readonly #everyMs: number;
  /** Rows were deleted and their old copies may still be in the pages' unallocated space. */
  #owed = false;
  #lastTryMs = Number.NEGATIVE_INFINITY;

  constructor(everyMs: number = DEFAULT_OLD_COPIES_EVERY_MS) {
    this.#everyMs = everyMs;
  }

  /** Retention deleted rows of this store. */
  deleted(): void {
    this.#owed = true;
  }

  /** Whether the whole clearing (the scrub, the VACUUM) is due now; otherwise the WAL only. */
  due(nowMs: number): boolean {
    return this.#owed && nowMs - this.#lastTryMs >= this.#everyMs;
  }

  /** A whole clearing was tried at `nowMs`: done (`complete`) or to be tried again an interval later. */
  tried(nowMs: number, complete: boolean): void {
    this.#lastTryMs = nowMs;
    if (complete) this.#owed = false;
  }

  get owed(): boolean {
    return this.#owed;
  }
}
