/**
 * A worker's rate limiter under `serve --workers N`: spends leased tokens locally and asks the
 * primary (over the cluster IPC channel) only when its lease for a data set is used up or expired.
 * See lease-protocol.ts for the accounting rules.
 */
import type { DataSetLimits } from './data-set-limits.js';
import type { BucketView } from './data-set-buckets.js';
import { LEASE_TTL_MS, type LeaseGiveBack, type LeaseReply, type LeaseRequest, type LeaseReturn } from './lease-protocol.js';
import { retryAfterSeconds, type Admission, type RateLimiter } from './rate-limiter.js';

interface Lease {
  requests: number;
  events: number;
  readonly second: number;
  readonly expiresAt: number;
  readonly limits: DataSetLimits;
  readonly view: BucketView;
}

export interface IpcChannel {
  send(message: LeaseRequest | LeaseReturn): void;
  onMessage(listener: (message: unknown) => void): () => void;
}

export class LeasedRateLimiter implements RateLimiter {
  readonly #leases = new Map<string, Lease>();
  readonly #waiting = new Map<number, (reply: LeaseReply) => void>();
  readonly #channel: IpcChannel;
  readonly #now: () => number;
  readonly #unsubscribe: () => void;
  readonly #sweeper: NodeJS.Timeout;
  #nextId = 1;

  constructor(channel: IpcChannel, now: () => number = Date.now) {
    this.#channel = channel;
    this.#now = now;
    this.#unsubscribe = channel.onMessage((message) => {
      const reply = message as LeaseReply;
      if (reply?.type !== 'ecapi:rl-grant') return;
      const resolve = this.#waiting.get(reply.id);
      this.#waiting.delete(reply.id);
      resolve?.(reply);
    });
    // Hand back what expired leases did not use, so idle workers do not strand a data set's quota.
    this.#sweeper = setInterval(() => {
      const giveBack = this.#collectExpired(this.#now());
      if (giveBack.length > 0) this.#channel.send({ type: 'ecapi:rl-return', giveBack });
    }, LEASE_TTL_MS);
    this.#sweeper.unref();
  }

  #collectExpired(nowMs: number, also?: string): LeaseGiveBack[] {
    const giveBack: LeaseGiveBack[] = [];
    for (const [dataSetId, lease] of this.#leases) {
      if (lease.expiresAt > nowMs && dataSetId !== also) continue;
      this.#leases.delete(dataSetId);
      if (lease.requests > 0 || lease.events > 0) {
        giveBack.push({ dataSetId, limits: lease.limits, requests: lease.requests, events: lease.events, second: lease.second });
      }
    }
    return giveBack;
  }

  #localView(lease: Lease): BucketView {
    // The authority's view right after it granted the lease (so already net of it); only the
    // time to the next second moves on.
    return {
      ...lease.view,
      msToNextSecond: Math.max(0, (lease.second + 1) * 1000 - this.#now()),
    };
  }

  admit(dataSetId: string, limits: DataSetLimits, requests: number, events: number): Admission | Promise<Admission> {
    const nowMs = this.#now();
    const lease = this.#leases.get(dataSetId);
    if (lease && lease.expiresAt > nowMs && lease.limits === limits && lease.requests >= requests && lease.events >= events) {
      lease.requests -= requests;
      lease.events -= events;
      return { ok: true, view: this.#localView(lease) };
    }
    return this.#acquire(dataSetId, limits, requests, events, nowMs);
  }

  #acquire(dataSetId: string, limits: DataSetLimits, requests: number, events: number, nowMs: number): Promise<Admission> {
    const giveBack = this.#collectExpired(nowMs, dataSetId);
    // Both kinds at once: a request is admitted in two steps (1 request, then its n events), and a
    // lease holding only one kind would be given back and re-taken at every step (two round trips
    // to the authority per request; with the database as the authority, the bottleneck).
    const want = {
      requests: Math.max(requests, Math.floor(limits.rps / 100)),
      events: Math.max(events, Math.floor(limits.eps / 100)),
    };
    const id = this.#nextId++;
    return new Promise<Admission>((resolve) => {
      this.#waiting.set(id, (reply) => {
        if (!reply.ok) {
          resolve({ ok: false, limit: reply.limit!, retryAfterSeconds: retryAfterSeconds(reply.retryAfterMs!), view: reply.view });
          return;
        }
        const leftover = { requests: reply.granted.requests - requests, events: reply.granted.events - events };
        if (leftover.requests > 0 || leftover.events > 0) {
          const previous = this.#leases.get(dataSetId);
          if (previous) {
            // A concurrent acquire already holds a lease: return that one rather than merge seconds.
            this.#channel.send({
              type: 'ecapi:rl-return',
              giveBack: [{ dataSetId, limits: previous.limits, requests: previous.requests, events: previous.events, second: previous.second }],
            });
          }
          this.#leases.set(dataSetId, {
            ...leftover,
            second: reply.second,
            expiresAt: this.#now() + LEASE_TTL_MS,
            limits,
            view: reply.view,
          });
        }
        resolve({ ok: true, view: reply.view });
      });
      this.#channel.send({ type: 'ecapi:rl-take', id, dataSetId, limits, need: { requests, events }, want, giveBack });
    });
  }

  close(): void {
    clearInterval(this.#sweeper);
    this.#unsubscribe();
    const giveBack = this.#collectExpired(Number.POSITIVE_INFINITY);
    if (giveBack.length > 0) {
      try {
        this.#channel.send({ type: 'ecapi:rl-return', giveBack });
      } catch {
        // The primary is gone; nothing to return to.
      }
    }
  }
}
