/**
 * `serve --no-rate-limit`: admission without limits, for deployments that enforce quotas at a
 * gateway in front of the service, and for measuring the limiter's own cost. No RateLimit headers.
 */
import type { Admission, RateLimiter } from './rate-limiter.js';

const ADMITTED: Admission = Object.freeze({ ok: true });

export class UnlimitedRateLimiter implements RateLimiter {
  admit(): Admission {
    return ADMITTED;
  }

  close(): void {}
}
