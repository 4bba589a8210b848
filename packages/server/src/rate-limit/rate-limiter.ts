/**
 * What the request path asks of rate limiting: may this data set spend `requests` requests and
 * `events` events now? Synchronous when the answer is local (one process, or a worker holding a
 * lease), a promise when it must ask the authority (another process, later another node).
 *
 * Every admission answer carries the IETF RateLimit-Policy / RateLimit headers
 * (draft-ietf-httpapi-ratelimit-headers) so that senders can pace themselves before a 429.
 */
import type { DataSetLimits } from './data-set-limits.js';
import type { BucketView, LimitName } from './data-set-buckets.js';

export interface Admission {
  readonly ok: boolean;
  readonly limit?: LimitName;
  /** Whole seconds, at least 1, until the same request would be admitted. */
  readonly retryAfterSeconds?: number;
  /**
   * The data set's quotas after this admission, for the response's RateLimit headers (absent when
   * limits are not enforced). Headers are rendered once per response, from the last admission.
   */
  readonly view?: BucketView;
}

export interface RateLimiter {
  admit(dataSetId: string, limits: DataSetLimits, requests: number, events: number): Admission | Promise<Admission>;
  close(): void;
}

export function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

const policyCache = new WeakMap<DataSetLimits, string>();

/** `RateLimit-Policy`: the three quotas with their windows in seconds. */
export function policyHeader(view: BucketView): string {
  let header = policyCache.get(view.limits);
  if (header === undefined) {
    const { limits } = view;
    header =
      `"burst";q=${limits.burstRps};w=1, ` +
      `"sustained";q=${view.sustainedCapacity};w=${Math.max(1, Math.ceil(view.sustainedCapacity / limits.rps))}, ` +
      `"events";q=${view.eventsCapacity};w=${Math.max(1, Math.ceil(view.eventsCapacity / limits.eps))}`;
    policyCache.set(view.limits, header);
  }
  return header;
}

/** `RateLimit`: remaining quota of each policy and seconds until it is whole again. */
export function rateLimitHeaders(view: BucketView): Record<string, string> {
  const { limits } = view;
  const sustainedT = Math.ceil((view.sustainedCapacity - view.sustainedRemaining) / limits.rps);
  const eventsT = Math.ceil((view.eventsCapacity - view.eventsRemaining) / limits.eps);
  return {
    'ratelimit-policy': policyHeader(view),
    ratelimit:
      `"burst";r=${view.burstRemaining};t=${Math.max(0, Math.ceil(view.msToNextSecond / 1000))}, ` +
      `"sustained";r=${view.sustainedRemaining};t=${Math.max(0, sustainedT)}, ` +
      `"events";r=${view.eventsRemaining};t=${Math.max(0, eventsT)}`,
  };
}
