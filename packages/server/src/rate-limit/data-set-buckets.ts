/**
 * The authoritative admission state of one data set, as pure arithmetic over an injected clock.
 *
 * Three limits, all of which must admit:
 * - peak: a counter per calendar second; no second ever admits more than burstRps requests;
 * - sustained: a token bucket refilled at rps, holding (burstRps - rps) * burstSeconds tokens, so an
 *   idle data set can run at burstRps for burstSeconds and is then held to rps;
 * - events: a token bucket refilled at eps, holding one second of events (at least 1,000).
 *
 * `take` is all-or-nothing: a refused request consumes nothing. It can take more than the caller
 * needs now (a lease for another process) and `giveBack` returns what a lease did not use.
 */
import { eventsCapacity, sustainedCapacity, type DataSetLimits } from './data-set-limits.js';

export type LimitName = 'requests' | 'burst' | 'events';

export interface TakeResult {
  readonly ok: boolean;
  /** When refused: which limit, and in how many ms the same take would be admitted. */
  readonly limit?: LimitName;
  readonly retryAfterMs?: number;
}

export interface BucketView {
  readonly limits: DataSetLimits;
  readonly sustainedRemaining: number;
  readonly sustainedCapacity: number;
  readonly burstRemaining: number;
  readonly eventsRemaining: number;
  readonly eventsCapacity: number;
  /** ms until the current peak second ends. */
  readonly msToNextSecond: number;
}

export class DataSetBuckets {
  #limits: DataSetLimits;
  #sustained: number;
  #events: number;
  #refilledAt: number;
  #second: number;
  #inSecond = 0;

  constructor(limits: DataSetLimits, nowMs: number) {
    this.#limits = limits;
    this.#sustained = sustainedCapacity(limits);
    this.#events = eventsCapacity(limits);
    this.#refilledAt = nowMs;
    this.#second = Math.floor(nowMs / 1000);
  }

  get limits(): DataSetLimits {
    return this.#limits;
  }

  /** New limits apply from now; accumulated tokens are kept but clipped to the new capacities. */
  setLimits(limits: DataSetLimits, nowMs: number): void {
    if (limits === this.#limits) return;
    this.#refill(nowMs);
    this.#limits = limits;
    this.#sustained = Math.min(this.#sustained, sustainedCapacity(limits));
    this.#events = Math.min(this.#events, eventsCapacity(limits));
  }

  #refill(nowMs: number): void {
    const elapsed = Math.max(0, nowMs - this.#refilledAt) / 1000;
    this.#refilledAt = Math.max(this.#refilledAt, nowMs);
    this.#sustained = Math.min(sustainedCapacity(this.#limits), this.#sustained + elapsed * this.#limits.rps);
    this.#events = Math.min(eventsCapacity(this.#limits), this.#events + elapsed * this.#limits.eps);
    const second = Math.floor(nowMs / 1000);
    if (second !== this.#second) {
      this.#second = second;
      this.#inSecond = 0;
    }
  }

  take(requests: number, events: number, nowMs: number): TakeResult {
    this.#refill(nowMs);
    const limits = this.#limits;
    if (requests > 0) {
      if (this.#inSecond + requests > limits.burstRps) {
        return { ok: false, limit: 'burst', retryAfterMs: (this.#second + 1) * 1000 - nowMs };
      }
      if (this.#sustained < requests) {
        return { ok: false, limit: 'requests', retryAfterMs: ((requests - this.#sustained) / limits.rps) * 1000 };
      }
    }
    if (events > 0 && this.#events < events) {
      return { ok: false, limit: 'events', retryAfterMs: ((events - this.#events) / limits.eps) * 1000 };
    }
    this.#inSecond += requests;
    this.#sustained -= requests;
    this.#events -= events;
    return { ok: true };
  }

  /** Returns unused leased tokens. Requests leased in an earlier second no longer count against this one. */
  giveBack(requests: number, events: number, leasedInSecond: number, nowMs: number): void {
    this.#refill(nowMs);
    this.#sustained = Math.min(sustainedCapacity(this.#limits), this.#sustained + requests);
    this.#events = Math.min(eventsCapacity(this.#limits), this.#events + events);
    if (leasedInSecond === this.#second) this.#inSecond = Math.max(0, this.#inSecond - requests);
  }

  view(nowMs: number): BucketView {
    this.#refill(nowMs);
    return {
      limits: this.#limits,
      sustainedRemaining: Math.floor(this.#sustained),
      sustainedCapacity: sustainedCapacity(this.#limits),
      burstRemaining: Math.max(0, this.#limits.burstRps - this.#inSecond),
      eventsRemaining: Math.floor(this.#events),
      eventsCapacity: eventsCapacity(this.#limits),
      msToNextSecond: (this.#second + 1) * 1000 - nowMs,
    };
  }
}
