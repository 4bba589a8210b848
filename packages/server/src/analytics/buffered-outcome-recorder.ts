/**
 * The serving process's IngestOutcomeRecorder: `record` only adds to in-memory counters per
 * (data set, UTC hour, name); a timer flushes them about once a second in one small transaction.
 * Best-effort by nature: a killed process loses the counts of its last second. That is why it
 * counts rejections only (never queued, so nothing else counts them); accepted events are counted
 * exactly by the queue commit that stores them.
 * A failed flush (file busy, disk trouble, the database away) keeps the counts for the next one, and
 * is said once per change (`onError` at the first, `onRecovered` at the first flush that succeeds
 * after it: model/failure-latch.ts), not every second of an outage. Rejection messages are
 * reduced to their group (array indexes removed) before they are counted; no event is ever seen.
 */
import { hourOf } from '../model/hourly-counters.js';
import { groupOfStoredReason } from './reason-groups.js';
import type { IngestOutcomeRecorder } from './ingest-outcome-recorder.js';
import type { DataSetCounterDelta, IngestStatsStore } from '../merged-view/view-store.js';
import { FailureLatch } from '../model/failure-latch.js';

/** At most this many distinct reason groups per data set and hour; the rest count as "other". */
const MAX_REASONS_PER_HOUR = 200;

export class BufferedOutcomeRecorder implements IngestOutcomeRecorder {
  readonly #store: IngestStatsStore;
  readonly #health: FailureLatch;
  #pending = new Map<string, number>();
  readonly #reasonsSeen = new Map<string, Set<string>>();
  readonly #timer: NodeJS.Timeout;
  #flushing: Promise<void> | null = null;
  #closed = false;

  constructor(store: IngestStatsStore, options: { flushMs?: number; onError?: (error: Error) => void; onRecovered?: () => void } = {}) {
    this.#store = store;
    this.#health = new FailureLatch(options.onError ?? (() => undefined), options.onRecovered);
    this.#timer = setInterval(() => void this.flush(), options.flushMs ?? 1000);
    this.#timer.unref();
  }

  /**
   * Only rejections are counted here. Accepted events are counted by the queue commit that stores
   * them (queue_accepted), exactly; a count kept here would lose up to a second of them with the
   * process.
   */
  record(dataSetId: string, receivedAtMs: number, _accepted: number, rejections: readonly string[]): void {
    if (this.#closed || rejections.length === 0) return;
    const prefix = `${dataSetId}\u0000${hourOf(receivedAtMs)}\u0000`;
    this.#add(`${prefix}rejected`, rejections.length);
    let seen = this.#reasonsSeen.get(prefix);
    if (!seen) this.#reasonsSeen.set(prefix, (seen = new Set()));
    for (const message of rejections) {
      let group = groupOfStoredReason(message);
      if (!seen.has(group)) {
        if (seen.size >= MAX_REASONS_PER_HOUR) group = 'other';
        else seen.add(group);
      }
      this.#add(`${prefix}reason:${group}`, 1);
    }
  }

  #add(key: string, n: number): void {
    this.#pending.set(key, (this.#pending.get(key) ?? 0) + n);
  }

  /** Writes the pending counts now. */
  flush(): Promise<void> {
    if (this.#flushing) return this.#flushing;
    if (this.#pending.size === 0) return Promise.resolve();
    const batch = this.#pending;
    this.#pending = new Map();
    const deltas: DataSetCounterDelta[] = [];
    for (const [key, n] of batch) {
      const first = key.indexOf('\u0000');
      const second = key.indexOf('\u0000', first + 1);
      deltas.push({ dataSetId: key.slice(0, first), hour: Number(key.slice(first + 1, second)), name: key.slice(second + 1), n });
    }
    this.#flushing = this.#store
      .add(deltas)
      .then(
        () => this.#health.succeeded(),
        (error: Error) => {
          // Keep the counts for the next flush.
          for (const [key, n] of batch) this.#add(key, n);
          this.#health.failed(error);
        },
      )
      .finally(() => {
        this.#flushing = null;
        // Forget reason sets of hours that are over, so memory stays bounded.
        const current = hourOf(Date.now());
        for (const prefix of this.#reasonsSeen.keys()) {
          if (Number(prefix.split('\u0000')[1]) < current - 3_600_000) this.#reasonsSeen.delete(prefix);
        }
      });
    return this.#flushing;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#timer);
    await this.#flushing;
    await this.flush();
    await this.#store.close();
  }
}
