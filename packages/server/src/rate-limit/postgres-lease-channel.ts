/**
 * Cluster-wide rate limits: the lease protocol of `serve --workers N` (lease-protocol.ts), with the
 * database as the authority instead of the node's primary. Every serving process of every node
 * runs a LeasedRateLimiter over this channel: requests spend leased tokens locally, and only a
 * lease refill (about 1% of a second's quota, or what one request needs) is a round trip to
 * PostgreSQL, one call of `rl_take` that updates the data set's `rate_buckets` row under its row
 * lock. Unused tokens go back (`rl_give_back`) when a lease expires after LEASE_TTL_MS.
 *
 * Every admitted request took its tokens from the one row, so the cluster never admits more than
 * the limits; leases held elsewhere can only delay admission by up to one lease lifetime.
 *
 * While the database is unreachable every refill fails (and fails open, below): `onError` hears the
 * first failure and `onRecovered` the first success after it (model/failure-latch.ts), not once per
 * request: under load in an outage that would be a warning line per refill, two per request.
 * While failing, the database is tried again at most once per TRY_WHILE_FAILING_MS; the refills in
 * between fail open at once and give nothing back. Trying each one would add the pool's connect
 * time-out to every request while the host is unreachable (the queue's own attempt already costs it
 * that), and queue a connection attempt per request against a database that is coming back.
 */
import type { BucketView, LimitName } from './data-set-buckets.js';
import { eventsCapacity, sustainedCapacity, type DataSetLimits } from './data-set-limits.js';
import type { LeaseGiveBack, LeaseReply, LeaseRequest, LeaseReturn } from './lease-protocol.js';
import type { IpcChannel } from './leased-rate-limiter.js';
import type { Pool } from '../postgres/database.js';
import { FailureLatch } from '../model/failure-latch.js';

interface TakeRow {
  o_ok: boolean;
  o_granted_r: number;
  o_granted_e: number;
  o_now_ms: number;
  o_limit: LimitName | null;
  o_retry_ms: number | null;
  o_sustained: number;
  o_events: number;
  o_in_second: number;
}

const limitArgs = (l: DataSetLimits) => [l.rps, l.burstRps, l.burstSeconds, l.eps];

/** While the database fails, how often a refill tries it again. */
export const TRY_WHILE_FAILING_MS = 1000;

export class PostgresLeaseChannel implements IpcChannel {
  readonly #pool: Pool;
  readonly #listeners = new Set<(message: unknown) => void>();
  readonly #health: FailureLatch;
  /** When a call last went to the database (Date.now()). */
  #triedAt = 0;

  constructor(pool: Pool, options: { onError?: (error: Error) => void; onRecovered?: () => void } = {}) {
    this.#pool = pool;
    this.#health = new FailureLatch(options.onError ?? (() => undefined), options.onRecovered);
  }

  #giveBack(giveBack: readonly LeaseGiveBack[]): Promise<unknown> {
    return Promise.all(
      giveBack.map((g) =>
        this.#pool
          .query('SELECT rl_give_back($1, $2, $3, $4, $5, $6, $7, $8)', [g.dataSetId, ...limitArgs(g.limits), g.requests, g.events, g.second])
          .then(() => this.#health.succeeded(), (error: Error) => this.#health.failed(error)),
      ),
    );
  }

  /** Failing, and tried less than TRY_WHILE_FAILING_MS ago: this call does not go to the database. */
  #holdingOff(): boolean {
    if (this.#health.failing && Date.now() - this.#triedAt < TRY_WHILE_FAILING_MS) return true;
    this.#triedAt = Date.now();
    return false;
  }

  async #take(message: LeaseRequest): Promise<LeaseReply> {
    const { limits } = message;
    try {
      const { rows } = await this.#pool.query<TakeRow>('SELECT * FROM rl_take($1, $2, $3, $4, $5, $6, $7, $8, $9)', [
        message.dataSetId,
        ...limitArgs(limits),
        message.need.requests,
        message.need.events,
        message.want.requests,
        message.want.events,
      ]);
      this.#health.succeeded();
      const row = rows[0]!;
      const second = Math.floor(Number(row.o_now_ms) / 1000);
      const view: BucketView = {
        limits,
        sustainedRemaining: Math.floor(row.o_sustained),
        sustainedCapacity: sustainedCapacity(limits),
        burstRemaining: Math.max(0, limits.burstRps - row.o_in_second),
        eventsRemaining: Math.floor(row.o_events),
        eventsCapacity: eventsCapacity(limits),
        msToNextSecond: (second + 1) * 1000 - Number(row.o_now_ms),
      };
      return {
        type: 'ecapi:rl-grant',
        id: message.id,
        ok: row.o_ok,
        granted: { requests: row.o_granted_r, events: row.o_granted_e },
        second,
        ...(row.o_ok ? {} : { limit: row.o_limit!, retryAfterMs: Math.max(0, row.o_retry_ms ?? 1000) }),
        view,
      };
    } catch (error) {
      // The authority is unreachable: fail open for this request rather than refuse every sender
      // while the queue (the same database) decides whether the request can be stored at all.
      this.#health.failed(error as Error);
      return failOpen(message);
    }
  }

  send(message: LeaseRequest | LeaseReturn): void {
    // Tokens given back must be in the bucket before the take that follows them: run on separate
    // pool connections, the take could otherwise commit first and be refused for tokens that were
    // on their way back (a 1,000-event batch refused under a 1,000 events/s limit, because the
    // request step's lease still held 10 of them).
    // One decision per message: its give-back and its take go to the database together or not at all.
    const holdingOff = this.#holdingOff();
    const returned = message.giveBack.length > 0 && !holdingOff ? this.#giveBack(message.giveBack) : Promise.resolve();
    if (message.type !== 'ecapi:rl-take') return;
    void returned
      .catch(() => undefined)
      .then(() => (holdingOff ? failOpen(message) : this.#take(message)))
      .then((reply) => {
        for (const listener of this.#listeners) listener(reply);
      });
  }

  onMessage(listener: (message: unknown) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
}

/** A grant of what the request needs, with full buckets: the limits are not enforced meanwhile. */
function failOpen(message: LeaseRequest): LeaseReply {
  const { limits } = message;
  return {
    type: 'ecapi:rl-grant',
    id: message.id,
    ok: true,
    granted: message.need,
    second: Math.floor(Date.now() / 1000),
    view: {
      limits,
      sustainedRemaining: sustainedCapacity(limits),
      sustainedCapacity: sustainedCapacity(limits),
      burstRemaining: limits.burstRps,
      eventsRemaining: eventsCapacity(limits),
      eventsCapacity: eventsCapacity(limits),
      msToNextSecond: 1000 - (Date.now() % 1000),
    },
  };
}
