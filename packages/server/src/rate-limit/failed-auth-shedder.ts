/**
 * Pre-authentication shedding: a token bucket per client address, spent by requests that fail
 * authentication. The callers pass the client's key (rate-limit/client-key.ts): an IPv4 address as
 * is, an IPv6 address by its /64, since one IPv6 host can send from any address of its /64 and
 * would otherwise get a fresh burst with each. While an address's bucket is empty, every request from it is answered 429 before
 * its body is read or any HMAC computed, so signature guessing and floods cost the attacker more
 * than the service. Authenticated traffic never spends it, and it never touches a data set's budget.
 *
 * Shared addresses (issue 29, point 6). Many clients can share one address (a NAT, a corporate
 * proxy, or every client at once behind an L4 balancer without the PROXY protocol), and one of them
 * failing must not shed the others. Before authentication nothing tells them apart except what
 * only a key holder can produce, so the exemption rests on proof already given:
 * - a (key id, address) pair whose request passed the HMAC within `verifiedForMs` (10 min) is
 *   *verified*: a later request from that address naming that key id is judged by the pair's own
 *   bucket (same limits), not the address's; its failures spend the pair's bucket. A client that
 *   does not hold the key's secret cannot make a pair verified, so it cannot escape its address's
 *   bucket, and a key holder's traffic is untouched by other clients' failures on the same address.
 *   (Key ids are not secrets: a client that knows a verified key id can spend that pair's bucket
 *   and so shed the pair, but then only that pair, and it gains no more than one extra bucket.)
 * - the caller (http/head-refusal.ts) also never sheds a connection on which a request already passed
 *   the HMAC: that client proved a secret on that very TCP connection.
 * Verified pairs are written only after an HMAC passed, i.e. only by key holders, and are bounded
 * by `maxVerifiedPairs` (oldest evicted first), so pre-authentication traffic cannot grow them.
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
/** How long a (key id, address) pair stays verified after its last request that passed the HMAC. */
export const DEFAULT_VERIFIED_FOR_MS = 10 * 60_000;
/** Verified (key id, address) pairs kept per process; past this the oldest is forgotten. */
export const DEFAULT_MAX_VERIFIED_PAIRS = 10_000;

interface AddressBucket {
  tokens: number;
  at: number;
}

interface VerifiedPair extends AddressBucket {
  /** Last time a request of this pair passed the HMAC. */
  verifiedAt: number;
}

export interface FailedAuthShedderOptions {
  readonly sharedOverflow?: boolean;
  readonly verifiedForMs?: number;
  readonly maxVerifiedPairs?: number;
}

/** The map key of a (key id, address) pair: a newline cannot occur in a header value. */
const pairOf = (address: string, keyId: string): string => `${keyId}\n${address}`;

export class FailedAuthShedder {
  readonly #buckets = new Map<string, AddressBucket>();
  /** Verified (key id, address) pairs, oldest verification first (re-inserted when refreshed). */
  readonly #verified = new Map<string, VerifiedPair>();
  readonly #sweeper: NodeJS.Timeout;
  /** With sharedOverflow: the one bucket of every address that found the table full. */
  readonly #overflow: AddressBucket | null;
  readonly #verifiedForMs: number;
  readonly #maxVerifiedPairs: number;

  constructor(
    private readonly limits: FailedAuthLimits = DEFAULT_FAILED_AUTH_LIMITS,
    private readonly now: () => number = Date.now,
    private readonly maxAddresses = 100_000,
    options: FailedAuthShedderOptions = {},
  ) {
    this.#overflow = options.sharedOverflow ? { tokens: limits.burst, at: now() } : null;
    this.#verifiedForMs = options.verifiedForMs ?? DEFAULT_VERIFIED_FOR_MS;
    this.#maxVerifiedPairs = options.maxVerifiedPairs ?? DEFAULT_MAX_VERIFIED_PAIRS;
    this.#sweeper = setInterval(() => this.#sweep(), 10_000);
    this.#sweeper.unref();
  }

  #current(bucket: AddressBucket, nowMs: number): number {
    return Math.min(this.limits.burst, bucket.tokens + ((nowMs - bucket.at) / 1000) * this.limits.perSecond);
  }

  #secondsOf(bucket: AddressBucket, nowMs: number): number {
    const tokens = this.#current(bucket, nowMs);
    return tokens >= 1 ? 0 : Math.max(1, Math.ceil(((1 - tokens) / this.limits.perSecond)));
  }

  /** The verified pair of (address, keyId), if its verification is recent enough. */
  #pair(address: string, keyId: string | undefined, nowMs: number): VerifiedPair | undefined {
    if (keyId === undefined || this.#verified.size === 0) return undefined;
    const pair = this.#verified.get(pairOf(address, keyId));
    return pair !== undefined && nowMs - pair.verifiedAt <= this.#verifiedForMs ? pair : undefined;
  }

  /**
   * 0 when the request may proceed, otherwise whole seconds until it may (Retry-After). `keyId` is
   * the key id the request names (unverified): it matters only when that pair is verified.
   */
  shedSeconds(address: string, keyId?: string): number {
    const nowMs = this.now();
    const pair = this.#pair(address, keyId, nowMs);
    if (pair) return this.#secondsOf(pair, nowMs);
    const bucket = this.#buckets.get(address) ?? (this.#buckets.size >= this.maxAddresses ? this.#overflow : null);
    return bucket ? this.#secondsOf(bucket, nowMs) : 0;
  }

  /** A request from `address` (naming `keyId`, if any) failed authentication. */
  recordFailure(address: string, keyId?: string): void {
    const nowMs = this.now();
    const pair = this.#pair(address, keyId, nowMs);
    if (pair) {
      pair.tokens = this.#current(pair, nowMs) - 1;
      pair.at = nowMs;
      return;
    }
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

  /**
   * A request from `address` with key id `keyId` passed the HMAC: call only then (never for a
   * request that failed or was refused before it), since the pair is what exempts it.
   */
  recordVerified(address: string, keyId: string): void {
    const nowMs = this.now();
    const id = pairOf(address, keyId);
    const pair = this.#verified.get(id);
    if (pair !== undefined) {
      // Re-inserted (to the young end) at most once a minute: the order is only for eviction.
      if (nowMs - pair.verifiedAt > 60_000) {
        this.#verified.delete(id);
        this.#verified.set(id, pair);
      }
      pair.verifiedAt = nowMs;
      return;
    }
    if (this.#verified.size >= this.#maxVerifiedPairs) {
      const oldest = this.#verified.keys().next().value as string;
      this.#verified.delete(oldest);
    }
    this.#verified.set(id, { tokens: this.limits.burst, at: nowMs, verifiedAt: nowMs });
  }

  #sweep(): void {
    const nowMs = this.now();
    for (const [address, bucket] of this.#buckets) {
      if (this.#current(bucket, nowMs) >= this.limits.burst) this.#buckets.delete(address);
    }
    for (const [id, pair] of this.#verified) {
      if (nowMs - pair.verifiedAt > this.#verifiedForMs) this.#verified.delete(id);
    }
  }

  /** Addresses with a bucket of their own (bounded by maxAddresses). */
  get trackedAddresses(): number {
    return this.#buckets.size;
  }

  /** Verified (key id, address) pairs held (bounded by maxVerifiedPairs). */
  get verifiedPairs(): number {
    return this.#verified.size;
  }

  close(): void {
    clearInterval(this.#sweeper);
  }
}
