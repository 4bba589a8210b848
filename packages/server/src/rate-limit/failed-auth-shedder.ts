/**
 * Pre-authentication shedding: a token bucket per client IP address, spent by requests that fail
 * authentication. While an address's bucket is empty, every request from it is answered 429 before
 * its body is read or any HMAC computed, so signature guessing and floods cost the attacker more
 * than the service. Authenticated traffic never spends it, and it never touches a data set's budget.
 *
 * Per process: with `--workers N` each worker keeps its own buckets (an attacker gets at most N
 * times the allowance; it is a flood guard, not an exact quota). Memory is bounded: full buckets are
 * forgotten on a periodic sweep, and at most `maxAddresses` are tracked. Beyond that, by default,
 * new addresses go untracked (never shed); with `sharedOverflow` (the admin port's throttle,
 * admin/admin-guard.ts) they all share one overflow bucket instead, so that spraying addresses
 * cannot switch the throttle off.
 */
export interface FailedAuthLimits {
  /** Failed requests per second an address may sustain. */
  readonly perSecond: number;
  /** How many failures an address may burst before it is shed. */
  readonly burst: number;
}

export const DEFAULT_FAILED_AUTH_LIMITS: FailedAuthLimits = Object.freeze({ perSecond: 50, burst: 500 });

interface AddressBucket {
  tokens: number;
  at: number;
}

export class FailedAuthShedder {
  readonly #buckets = new Map<string, AddressBucket>();
  readonly #sweeper: NodeJS.Timeout;
  /** With sharedOverflow: the one bucket of every address that found the table full. */
  readonly #overflow: AddressBucket | null;

  constructor(
    private readonly limits: FailedAuthLimits = DEFAULT_FAILED_AUTH_LIMITS,
    private readonly now: () => number = Date.now,
    private readonly maxAddresses = 100_000,
    options: { readonly sharedOverflow?: boolean } = {},
  ) {
    this.#overflow = options.sharedOverflow ? { tokens: limits.burst, at: now() } : null;
    this.#sweeper = setInterval(() => this.#sweep(), 10_000);
    this.#sweeper.unref();
  }

  #current(bucket: AddressBucket, nowMs: number): number {
    return Math.min(this.limits.burst, bucket.tokens + ((nowMs - bucket.at) / 1000) * this.limits.perSecond);
  }

  /** 0 when the address may proceed, otherwise whole seconds until it may (Retry-After). */
  shedSeconds(address: string): number {
    const bucket = this.#buckets.get(address) ?? (this.#buckets.size >= this.maxAddresses ? this.#overflow : null);
    if (!bucket) return 0;
    const tokens = this.#current(bucket, this.now());
    return tokens >= 1 ? 0 : Math.max(1, Math.ceil(((1 - tokens) / this.limits.perSecond)));
  }

  recordFailure(address: string): void {
    const nowMs = this.now();
    const bucket = this.#buckets.get(address);
    if (bucket) {
      bucket.tokens = this.#current(bucket, nowMs) - 1;
      bucket.at = nowMs;
      return;
    }
    if (this.#buckets.size >= this.maxAddresses) this.#sweep();
    if (this.#buckets.size >= this.maxAddresses) {
      if (this.#overflow) {
        this.#overflow.tokens = this.#current(this.#overflow, nowMs) - 1;
        this.#overflow.at = nowMs;
      }
      return;
    }
    this.#buckets.set(address, { tokens: this.limits.burst - 1, at: nowMs });
  }

  #sweep(): void {
    const nowMs = this.now();
    for (const [address, bucket] of this.#buckets) {
      if (this.#current(bucket, nowMs) >= this.limits.burst) this.#buckets.delete(address);
    }
  }

  /** Addresses with a bucket of their own (bounded by maxAddresses). */
  get trackedAddresses(): number {
    return this.#buckets.size;
  }

  close(): void {
    clearInterval(this.#sweeper);
  }
}
