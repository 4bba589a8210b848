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
 * deleted it, instead of at the end of the round. With `everyMs` 0, every round (the tests of the
 * documented bounds). Deletion requests do not go through this: each clears everything before it
 * is marked done.
 *
 * Hazards, and what is done about them:
 * - The debt lives in memory: a worker stopped (or killed) within the interval after a deferred
 *   round would forget it, and a file where nothing expires again would keep those copies. So a new
 *   schedule starts owed: the first round after a start clears every store it is given (one whole
 *   clearing per start).
 * - A try that does not complete (a reader or writer kept the file busy, or the whole-file sweep
 *   ran past its time) is tried again RETRY_MS later, doubling while tries keep failing, up to the
 *   interval: not at every tick (each try reads the file, and a file too large for the sweep's time
 *   cap would fail every time) and not a whole interval later when the cause was a passing reader.
 */
export const DEFAULT_OLD_COPIES_EVERY_MS = 15 * 60_000;
/** After a try that did not complete, the next one (or the interval, when that is shorter). */
export const RETRY_MS = 60_000;

export class OldCopiesSchedule {
  readonly #everyMs: number;
  /** Rows were deleted (or the process just started) and old copies may be in the pages' unallocated space. */
  #owed = true;
  /** When the next whole clearing may run. */
  #nextMs = Number.NEGATIVE_INFINITY;
  /** Tries in a row that did not complete. */
  #failedTries = 0;

  constructor(everyMs: number = DEFAULT_OLD_COPIES_EVERY_MS) {
    this.#everyMs = everyMs;
  }

  /** Retention deleted rows of this store. */
  deleted(): void {
    this.#owed = true;
  }

  /** Whether the whole clearing (the scrub, the VACUUM) is due now; otherwise the WAL only. */
  due(nowMs: number): boolean {
    return this.#owed && nowMs >= this.#nextMs;
  }

  /** A whole clearing was tried at `nowMs`: done (`complete`), or to be tried again (RETRY_MS, doubling). */
  tried(nowMs: number, complete: boolean): void {
    if (complete) {
      this.#owed = false;
      this.#failedTries = 0;
      this.#nextMs = nowMs + this.#everyMs;
      return;
    }
    this.#failedTries++;
    this.#nextMs = nowMs + Math.min(this.#everyMs, RETRY_MS * 2 ** Math.min(this.#failedTries - 1, 20));
  }

  get owed(): boolean {
    return this.#owed;
  }
}
