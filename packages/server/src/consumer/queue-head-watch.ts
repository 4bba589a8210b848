/**
 * Idle lanes that cost nothing while the queue does not move (the PostgreSQL profile's consumer).
 *
 * A `worker` on PostgreSQL runs one lane per queue partition it leases (postgres-partitions.ts),
 * and an idle lane polls every 100 ms: its step reads its offset and looks for segments after it,
 * three queries that find nothing. With 16 partitions that was ~480 queries a second from one idle
 * worker (bench/README.md, issue 30: ~11% of a core, the worker's and the database's together),
 * and it stays that way for the 15 idle lanes while one data set's lane applies a backlog.
 *
 * The queue has one head, `queue_head.next_seq`, moved by every append in the transaction that
 * inserts the segments (postgres-event-queue.ts). Appends take that row's lock, so they commit in
 * queue order, and a reader that sees head H sees every segment below H. Hence the rule:
 * - a lane reads the head (H) **before** it steps; a step that found nothing (`moved: false`) means
 *   its partition has no record in [its offset, H) left to apply;
 * - as long as the head still reads H, nothing was appended anywhere, so the lane does not step: it
 *   answers "idle" at the cost of nothing (the head is read once for all lanes of the worker, at
 *   most every `maxAgeMs`);
 * - when the head moves, every idle lane steps once again, and rests again if its partition got
 *   nothing.
 * Nothing else creates work for a lane: offsets only move forward and only by consumers (a lane
 * that another worker overtook just finds less), erasers and retention only remove, and a
 * partition newly leased gets a new lane, which steps first. The cost is latency: a new record is
 * noticed up to `maxAgeMs` later than before (the head read shared by the lanes is that old at
 * most), on top of the lane's poll interval.
 */
import type { PartitionStepper } from './consumer-loop.js';
import type { StepResult } from './view-consumer.js';

/** The queue's head (the next sequence number to be assigned), read at most every `maxAgeMs` for every caller. */
export class QueueHeadWatch {
  readonly #read: () => Promise<number>;
  readonly #maxAgeMs: number;
  readonly #now: () => number;
  #value = -1;
  #readAt = Number.NEGATIVE_INFINITY;
  #inFlight: Promise<number> | null = null;
  /** Reads of the head made (for tests and the bench: what the lanes cost while idle). */
  reads = 0;

  constructor(read: () => Promise<number>, maxAgeMs: number, now: () => number = () => performance.now()) {
    this.#read = read;
    this.#maxAgeMs = maxAgeMs;
    this.#now = now;
  }

  /**
   * The head, as read at most `maxAgeMs` ago; callers meanwhile share one read. The value returned
   * was read before this call resolved, so a step started after it sees at least what it saw.
   */
  head(): Promise<number> {
    if (this.#now() - this.#readAt < this.#maxAgeMs) return Promise.resolve(this.#value);
    if (this.#inFlight) return this.#inFlight;
    const started = this.#now();
    this.reads++;
    this.#inFlight = this.#read().then(
      (value) => {
        this.#value = value;
        this.#readAt = started;
        this.#inFlight = null;
        return value;
      },
      (error: unknown) => {
        this.#inFlight = null;
        throw error;
      },
    );
    return this.#inFlight;
  }
}

/**
 * `stepper`, except that after a step that found nothing it does not step again until the head
 * read by `watch` differs from the one read before that step; meanwhile it answers that step's
 * result (nothing applied, not moved). A failed head read fails the step (the loop retries it).
 */
export function skippingWhileIdle(stepper: PartitionStepper, watch: QueueHeadWatch): PartitionStepper {
  /** The head read before the last step, when that step found nothing; -1 otherwise. */
  let idleAt = -1;
  let idle: StepResult | null = null;
  return {
    name: stepper.name,
    async step() {
      const head = await watch.head();
      if (idle !== null && head === idleAt) return idle;
      const result = await stepper.step();
      idle = result.moved ? null : result;
      idleAt = result.moved ? -1 : head;
      return result;
    },
  };
}
