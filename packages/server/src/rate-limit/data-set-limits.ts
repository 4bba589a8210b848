/**
 * Rate limits of one data set, as an operator sets them (`data-set limits`), with the spec's defaults:
 * 1,000 requests/s sustained; bursts up to 5,000 requests/s for up to 60 s; 100,000 events/s.
 */
export interface DataSetLimits {
  /** Sustained requests per second. */
  readonly rps: number;
  /** Requests admitted in any one second, at most. */
  readonly burstRps: number;
  /** How long an idle data set may run at burstRps before it is held to rps. */
  readonly burstSeconds: number;
  /** Sustained events per second, across batches. */
  readonly eps: number;
}

export const DEFAULT_LIMITS: DataSetLimits = Object.freeze({ rps: 1000, burstRps: 5000, burstSeconds: 60, eps: 100_000 });

/**
 * The sustained bucket holds exactly the extra requests a burst may spend: running at burstRps while
 * refilling at rps drains (burstRps - rps) per second, so it empties after burstSeconds.
 *
 * At least one second of rps: with rps == burstRps the formula gives 0, and a bucket of a single
 * token refuses every request that arrives in the same millisecond as another (the refill is
 * time-based), so a data set limited to 100,000 req/s was held to a few hundred. The per-second
 * peak counter still caps every second at burstRps, so the larger bucket never admits more.
 */
export function sustainedCapacity(limits: DataSetLimits): number {
  return Math.max(limits.rps, (limits.burstRps - limits.rps) * limits.burstSeconds);
}

/** The events bucket holds one second of events, and never less than one full batch. */
export function eventsCapacity(limits: DataSetLimits): number {
  return Math.max(limits.eps, 1000);
}

export function validateLimits(limits: DataSetLimits): void {
  for (const [name, value] of Object.entries(limits)) {
    if (!Number.isFinite(value) || value <= 0) throw new Error(`invalid limit ${name}: must be a positive number`);
  }
  if (limits.burstRps < limits.rps) throw new Error('invalid limits: burst-rps must be at least rps');
}
