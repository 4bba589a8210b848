/**
 * The request path's live report for the operator console (issue 10), next to the analytics
 * `IngestOutcomeRecorder`. Calls run on the serving thread and must stay cheap: implementations
 * only copy a few fields into in-memory ring buffers. Nothing here is ever logged.
 *
 * `events` (the accepted events as queued) and `rejectedEvents` (as received) are passed only when
 * `wantsEvents` is true, which the service sets for `--env test` alone: the production console
 * never shows event contents. `requestFailed` is called, under the same condition, for a request
 * answered as a whole with an error (observability/request-failure.ts says what is kept of it).
 */
import type { EventPolicyMeta } from '../events/event-outcome.js';
import type { RejectionReason } from '../observability/service-metrics.js';
import type { ObservedFailure } from '../observability/request-failure.js';

export interface ObservedEventError {
  readonly index: number;
  readonly event_id: string | null;
  /** The stored form of the message (validation/stored-reason.ts): sender-controlled names and values masked. */
  readonly error: string;
  /** Its reason label, from the rejection's code (never recognised from the text). */
  readonly reason: RejectionReason;
}

export interface ObservedRequest {
  readonly dataSetId: string;
  readonly keyId: string;
  readonly requestId: string;
  readonly receivedAtMs: number;
  /** Events durably queued (0 for the all-rejected 400). */
  readonly accepted: number;
  /** Policy metadata of the accepted events, in order (consent decisions). */
  readonly metas: readonly (EventPolicyMeta | undefined)[];
  /** The accepted events as queued, in order; only when `wantsEvents`. */
  readonly events?: readonly Record<string, unknown>[] | undefined;
  /** The response's `errors[]`, in their stored form. */
  readonly errors: readonly ObservedEventError[];
  /** The rejected events as received, in the order of `errors`; only when `wantsEvents`. */
  readonly rejectedEvents?: readonly unknown[] | undefined;
}

export interface IngestObserver {
  readonly wantsEvents: boolean;
  /** A request reached per-event validation and got its 200, 207 or all-rejected 400. */
  validated(request: ObservedRequest): void;
  /** An authenticated, authorized request of this data set was answered 429. */
  rateLimited(dataSetId: string, nowMs: number): void;
  /** Only when `wantsEvents`: a request answered with a request-level error (4xx/5xx without per-event outcomes). */
  requestFailed?(failure: ObservedFailure): void;
}
