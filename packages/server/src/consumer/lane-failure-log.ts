/**
 * What the consumer's log says of failed batches. Its lanes (16 on PostgreSQL, one per view
 * partition on the embedded profile) each retry a failed batch with backoff (consumer-loop.ts);
 * when the cause is shared (the database away, the disk full) every lane fails on every try, and a
 * line per failed batch was 80 lines in the first 8 s of a PostgreSQL outage, none of them saying
 * when it ended.
 *
 * So, per failing spell (from the first failed batch until no lane is failing):
 * - each distinct error message is said once, with the lane that met it first (a lane stuck on a
 *   batch of its own, with a cause of its own, is still said beside a shared outage), up to
 *   MAX_MESSAGES messages;
 * - while lanes still fail, a reminder every `remindMs` (default 60 s) with how many lanes fail and
 *   how many batches failed since the last line, so a stuck consumer never goes quiet;
 * - "consumer batches recovered" once every lane applies or idles again.
 * Messages are the storage's own error text, as before (no identifier or event content is put in
 * them by this code).
 */
import type { Logger } from '../observability/logger.js';

/** Distinct error messages said per failing spell; further ones are counted in the reminders. */
export const MAX_MESSAGES = 8;
export const REMIND_MS = 60_000;

export class LaneFailureLog {
  readonly #logger: Logger;
  readonly #remindMs: number;
  readonly #now: () => number;
  readonly #said = new Set<string>();
  #failing = false;
  #saidAt = 0;
  /** Failed batches since the last line. */
  #unsaid = 0;

  constructor(logger: Logger, options: { readonly remindMs?: number; readonly now?: () => number } = {}) {
    this.#logger = logger;
    this.#remindMs = options.remindMs ?? REMIND_MS;
    this.#now = options.now ?? Date.now;
  }

  /** A lane's batch failed; it retries in `retryInMs`. */
  failed(lane: string, error: Error, retryInMs: number): void {
    this.#failing = true;
    const message = error.message;
    if (this.#said.has(message) || this.#said.size >= MAX_MESSAGES) {
      this.#unsaid++;
      return;
    }
    this.#said.add(message);
    this.#saidAt = this.#now();
    this.#logger.error(
      { err: { message }, partition: lane, retry_in_ms: retryInMs },
      'consumer batch failed; retrying with backoff (said once per error until every lane applies again)',
    );
  }

  /** Called by the loop's control part (every 250 ms or so) with how many lanes are failing now. */
  check(failingLanes: number): void {
    if (!this.#failing) return;
    if (failingLanes === 0) {
      this.#logger.info({ failed_batches_unsaid: this.#unsaid }, 'consumer batches recovered');
      this.#failing = false;
      this.#said.clear();
      this.#unsaid = 0;
      return;
    }
    const now = this.#now();
    if (now - this.#saidAt >= this.#remindMs) {
      this.#logger.error({ failing_lanes: failingLanes, failed_batches: this.#unsaid, errors: this.#said.size }, 'consumer batches still failing');
      this.#saidAt = now;
      this.#unsaid = 0;
    }
  }
}
