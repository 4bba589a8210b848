/** The primary's side of token leasing: answers workers from one LocalRateLimiter. */
import type { LocalRateLimiter } from './local-rate-limiter.js';
import type { LeaseGiveBack, LeaseReply, LeaseRequest, LeaseReturn } from './lease-protocol.js';

export class LeaseAuthority {
  constructor(private readonly limiter: LocalRateLimiter) {}

  #giveBack(giveBack: readonly LeaseGiveBack[]): void {
    for (const g of giveBack) this.limiter.giveBack(g.dataSetId, g.limits, g.requests, g.events, g.second);
  }

  handle(message: LeaseRequest | LeaseReturn): LeaseReply | null {
    this.#giveBack(message.giveBack);
    if (message.type === 'ecapi:rl-return') return null;
    const { dataSetId, limits, want, need } = message;
    // Try the full lease; fall back to just what is needed now.
    let taken = this.limiter.take(dataSetId, limits, want.requests, want.events);
    let granted = want;
    if (!taken.result.ok && (want.requests !== need.requests || want.events !== need.events)) {
      taken = this.limiter.take(dataSetId, limits, need.requests, need.events);
      granted = need;
    }
    return {
      type: 'ecapi:rl-grant',
      id: message.id,
      ok: taken.result.ok,
      granted: taken.result.ok ? granted : { requests: 0, events: 0 },
      second: taken.second,
      ...(taken.result.ok ? {} : { limit: taken.result.limit!, retryAfterMs: taken.result.retryAfterMs! }),
      view: taken.view,
    };
  }
}
