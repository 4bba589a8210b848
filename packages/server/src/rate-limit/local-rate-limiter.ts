/**
 * Rate limiting inside one process: the authoritative buckets of every data set, in memory.
 * Used directly by a single-process server, and by the primary of `serve --workers N` to answer
 * the workers' lease requests.
 */
import { DataSetBuckets, type TakeResult, type BucketView } from './data-set-buckets.js';
import type { DataSetLimits } from './data-set-limits.js';
import { retryAfterSeconds, type Admission, type RateLimiter } from './rate-limiter.js';

export class LocalRateLimiter implements RateLimiter {
  readonly #buckets = new Map<string, DataSetBuckets>();
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  #bucketsOf(dataSetId: string, limits: DataSetLimits, nowMs: number): DataSetBuckets {
    let buckets = this.#buckets.get(dataSetId);
    if (!buckets) this.#buckets.set(dataSetId, (buckets = new DataSetBuckets(limits, nowMs)));
    else buckets.setLimits(limits, nowMs);
    return buckets;
  }

  /** Raw access for the lease authority. */
  take(dataSetId: string, limits: DataSetLimits, requests: number, events: number): { result: TakeResult; view: BucketView; second: number } {
    const nowMs = this.#now();
    const buckets = this.#bucketsOf(dataSetId, limits, nowMs);
    const result = buckets.take(requests, events, nowMs);
    return { result, view: buckets.view(nowMs), second: Math.floor(nowMs / 1000) };
  }

  giveBack(dataSetId: string, limits: DataSetLimits, requests: number, events: number, leasedInSecond: number): void {
    const nowMs = this.#now();
    this.#bucketsOf(dataSetId, limits, nowMs).giveBack(requests, events, leasedInSecond, nowMs);
  }

  admit(dataSetId: string, limits: DataSetLimits, requests: number, events: number): Admission {
    const { result, view } = this.take(dataSetId, limits, requests, events);
    if (result.ok) return { ok: true, view };
    return { ok: false, limit: result.limit!, retryAfterSeconds: retryAfterSeconds(result.retryAfterMs!), view };
  }

  close(): void {}
}
