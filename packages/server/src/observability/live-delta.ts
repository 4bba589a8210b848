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

export interface TestEventEntry {
  readonly at: number;
  readonly data_set_id: string;
  readonly key_id: string;
  readonly request_id: string;
  readonly index: number;
  readonly event_id: string | null;
  readonly event_type: string | null;
  readonly outcome: 'accepted' | 'rejected';
  readonly error?: string;
  /** The event for display (event-display.ts): accepted as queued, rejected as received; masked. */
  readonly event?: unknown;
  readonly event_omitted?: string;
}

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
}
