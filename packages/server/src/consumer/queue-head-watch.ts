/**
 * Idle lanes that cost nothing while their partition gets nothing new (the PostgreSQL profile's
 * consumer).
 *
 * A `worker` on PostgreSQL runs one lane per queue partition it leases (postgres-partitions.ts),
 * and an idle lane polls every 100 ms: its step reads its offset and looks for segments after it,
 * three queries that find nothing. With 16 partitions that was ~480 queries a second from one idle
 * worker (bench/README.md, issue 30: ~17% of a core, the worker's and the database's together),
 * and it stayed that way for the 15 idle lanes while one data set's lane applied its records.
 *
 * The queue has one head, `queue_head.next_seq`, moved by every append in the statement that
 * inserts the segments (postgres-event-queue.ts). Appends take that row's lock, so they commit in
 * queue order, and a reader that sees head H sees every segment below H. The watch reads, in one
 * statement (one snapshot), the head and the partitions of the segments appended since its previous
 * read, and keeps the last HISTORY such intervals. Hence the rule:
 * - a lane reads the head (H) **before** it steps; a step that found nothing (`moved: false`) means
 *   its partition has no record below H left to apply (idle at H);
 * - later, at head H2, if no interval between H and H2 names its partition (or H2 = H), nothing was
 *   appended to it: the lane does not step, and is idle at H2;
 * - otherwise (its partition got segments, or the intervals do not reach back to H) it steps.
 * Nothing else creates work for a lane: offsets only move forward and only by consumers (a lane
 * that another worker overtook just finds less), erasers and retention only remove, and a
 * partition newly leased gets a new lane, which steps first. The cost is latency: a new record is
 * noticed up to `maxAgeMs` later than before (the read shared by the lanes is that old at most),
 * on top of the lane's poll interval; and one read per `maxAgeMs` for the whole worker.
 */
import type { PartitionStepper } from './consumer-loop.js';
import type { StepResult } from './view-consumer.js';

/** One read of the queue: its head, and the partitions with segments in [since, head) (null: not known). */
export interface HeadRead {
  readonly head: number;
  readonly parts: readonly number[] | null;
}

/** Appended intervals kept; a lane idle since before the oldest one simply steps. */
const HISTORY = 64;

interface Interval {
  readonly from: number;
  readonly to: number;
  /** Partitions that got segments in [from, to); null: not known (the first read). */
  readonly parts: ReadonlySet<number> | null;
}

/** The queue's head and what was appended where, read at most every `maxAgeMs` for every caller. */
export class QueueHeadWatch {
  readonly #read: (since: number) => Promise<HeadRead>;
  readonly #maxAgeMs: number;
  readonly #now: () => number;
  #value = -1;
  #readAt = Number.NEGATIVE_INFINITY;
  #inFlight: Promise<number> | null = null;
  /** Contiguous intervals, oldest first, ending at the head last read. */
  readonly #history: Interval[] = [];
  /** Reads made (for tests and the bench: what the lanes cost while idle). */
  reads = 0;

  /** `read(since)`: the head, and the partitions of the segments in [since, head); `since` is -1 at the first read. */
  constructor(read: (since: number) => Promise<HeadRead>, maxAgeMs: number, now: () => number = () => performance.now()) {
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
    const since = this.#value;
    this.reads++;
    this.#inFlight = this.#read(since).then(
      ({ head, parts }) => {
        if (head > since) {
          this.#history.push({ from: since, to: head, parts: since < 0 || parts === null ? null : new Set(parts) });
          if (this.#history.length > HISTORY) this.#history.shift();
        }
        this.#value = Math.max(head, since);
        this.#readAt = started;
        this.#inFlight = null;
        return this.#value;
      },
      (error: unknown) => {
        this.#inFlight = null;
        throw error;
      },
    );
    return this.#inFlight;
  }

  /**
   * Whether partition `part` may have got segments in [from, to): false only when the intervals
   * read cover that range and none names it. `to` is a head this watch returned.
   */
  appendedTo(part: number, from: number, to: number): boolean {
    if (from >= to) return false;
    const oldest = this.#history[0];
    if (oldest === undefined || oldest.from > from) return true; // not read back that far
    for (const interval of this.#history) {
      if (interval.to <= from || interval.from >= to) continue;
      if (interval.parts === null || interval.parts.has(part)) return true;
    }
    return false;
  }
}

/**
 * `stepper` (the lane of queue partition `part`), except that after a step that found nothing it
 * does not step again until `watch` shows segments appended to `part` since the head read before
 * that step; meanwhile it answers that step's result (nothing applied, not moved). A failed read
 * fails the step (the loop retries it).
 */
export function skippingWhileIdle(stepper: PartitionStepper, part: number, watch: QueueHeadWatch): PartitionStepper {
  /** A head below which the partition has nothing left to apply, when the last step found nothing; -1 otherwise. */
  let idleAt = -1;
  let idle: StepResult | null = null;
  return {
    name: stepper.name,
    async step() {
      const head = await watch.head();
      if (idle !== null && !watch.appendedTo(part, idleAt, head)) {
        idleAt = Math.max(idleAt, head);
        return idle;
      }
      const result = await stepper.step();
      // A lane held at a fence (the sharded layout's lifecycle) is not idle: its partition may have
      // records past the fence, to apply as soon as it is released, whether or not more arrive.
      const rests = !result.moved && result.held !== true;
      idle = rests ? result : null;
      idleAt = rests ? head : -1;
      return result;
    },
  };
}
