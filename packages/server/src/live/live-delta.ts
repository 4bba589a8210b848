/**
 * What a serving process reports to the live store once a second (`LiveDelta`), and the bounds both
 * sides keep. Plain JSON: a delta crosses the cluster IPC channel with `serve --workers N`.
 * See live-stats.ts for how the recorder, the display masking and the store fit together.
 */

export const LIVE_WINDOW_MS = 3_600_000;
/** Recent rejection messages kept per data set (store), and per second per process (recorder: 4x). */
export const MAX_REJECTIONS_PER_DATA_SET = 50;
/** Test-environment events kept (store), and per second per process (recorder). */
export const MAX_TEST_EVENTS = 200;
/**
 * Request-level failures of requests that did not authenticate, kept by the test environment
 * (store: a fixed ring; recorder: per second per process). Everything before authentication is an
 * attacker's to fill, so this ring is separate from the test events (it can never push a signed
 * sender's entries out) and every field of its entries is cut to a bound (MAX_FAILURE_FIELD_CHARS).
 */
export const MAX_UNAUTHENTICATED_FAILURES = 50;
/** Longest header value, error message or path kept in a request-level failure entry. */
export const MAX_FAILURE_FIELD_CHARS = 256;
export const MAX_DATA_SETS = 10_000;

export interface CumulativeHistogram {
  /** Upper bounds (seconds), without +Inf. */
  readonly bounds: number[];
  /** Counts per bound, cumulative (Prometheus `le` semantics); the last entry is +Inf (= total). */
  readonly counts: number[];
  readonly sum: number;
}

export interface DataSetDelta {
  accepted: number;
  rejected: number;
  reasons: Record<string, number>;
  rate_limited: number;
  measurement_only: number;
}

export function emptyDataSet(): DataSetDelta {
  return { accepted: 0, rejected: 0, reasons: {}, rate_limited: 0, measurement_only: 0 };
}

export interface RejectionEntry {
  readonly at: number;
  readonly data_set_id: string;
  readonly request_id: string;
  readonly index: number;
  readonly event_id: string | null;
  /** The stored form of the message (validation/stored-reason.ts): echoed values masked. */
  readonly error: string;
}

/** One event of a request that reached per-event validation, with its outcome. */
export interface EventOutcomeEntry {
  readonly at: number;
  readonly data_set_id: string;
  readonly key_id: string;
  readonly request_id: string;
  readonly index: number;
  /** The event's `id`, masked when it is an identifier (event-display.ts: displayedEventId). */
  readonly event_id: string | null;
  readonly event_type: string | null;
  readonly outcome: 'accepted' | 'rejected';
  readonly error?: string;
  /** The event for display (event-display.ts): accepted as queued, rejected as received; masked. */
  readonly event?: unknown;
  readonly event_omitted?: string;
}

/**
 * A request answered as a whole with an error (authentication, body, media type, size, rate limit,
 * gateway, backend): no per-event outcome exists. `authenticated` says whether its HMAC verified:
 * only then are `key_id`/`data_set_id` proven and the masked body kept.
 */
export interface RequestFailureEntry {
  readonly at: number;
  readonly request_id: string;
  readonly outcome: 'failed';
  readonly authenticated: boolean;
  readonly status: number;
  /** The error message exactly as sent (`error` or, from the gateway, `message` of the body); cut to a bound. */
  readonly error: string;
  /** The error registry's code (errors.ts; the gateway's 403 and 404 included), or null for an answer without one. */
  readonly error_code: string | null;
  /** The key id and data set: proven when authenticated; otherwise as named by the headers, when they exist. */
  readonly key_id: string | null;
  readonly data_set_id: string | null;
  readonly method: string;
  readonly path: string;
  /** The headers that decide such answers, values cut to a bound; the signature never (its length only). */
  readonly headers: Record<string, string>;
  /** Authenticated requests only: the body's events masked as rejected events are (event-display.ts). */
  readonly body?: unknown;
  readonly body_omitted?: string;
  readonly index: null;
  readonly event_id: null;
  readonly event_type: null;
}

export type TestEventEntry = EventOutcomeEntry | RequestFailureEntry;

/** What one serving process observed during about one second. */
export interface LiveDelta {
  readonly at: number;
  /** The serving process it comes from. */
  readonly pid: number;
  readonly requests: Record<string, number>;
  readonly latency: CumulativeHistogram | null;
  readonly append: CumulativeHistogram | null;
  readonly accepted: number;
  readonly rejected: Record<string, number>;
  readonly rate_limited: Record<string, number>;
  readonly data_sets: Record<string, DataSetDelta>;
  readonly rejections: RejectionEntry[];
  readonly test_events: TestEventEntry[];
  /** Request-level failures before authentication (test environment only; a ring of its own). */
  readonly unauthenticated_failures?: RequestFailureEntry[];
}
