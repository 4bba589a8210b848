/**
 * The serving process's side of the console's live figures (see live-stats.ts): `LiveRecorder`
 * samples the process's own Prometheus metrics once a second and diffs them against the previous
 * sample, so the hot path does no extra work for the node-wide series. As the request path's
 * `IngestObserver` it also collects what Prometheus labels must not carry: per-data-set counts,
 * the most recent rejection messages (index, event id, stored message; never a body), and, in the
 * test environment only, every event with its outcome and a masked copy for display
 * (event-display.ts), and every request answered with a request-level error (request-failure.ts;
 * those that did not authenticate in a list of their own). Everything it holds is bounded per
 * second and handed over by `collect()`.
 */
import type { ServiceMetrics } from '../observability/service-metrics.js';
import type { IngestObserver, ObservedFailure, ObservedRequest } from '../analytics/ingest-observer.js';
import { displayedEventId, eventForDisplay, eventIdForDisplay, rejectedEventForDisplay } from './event-display.js';
import { requestFailureEntry } from './request-failure.js';
import {
  emptyDataSet, MAX_REJECTIONS_PER_DATA_SET, MAX_TEST_EVENTS, MAX_UNAUTHENTICATED_FAILURES,
  type CumulativeHistogram, type DataSetDelta, type LiveDelta, type RejectionEntry, type RequestFailureEntry, type TestEventEntry,
} from './live-delta.js';

const SECOND = 1000;

type MetricValue = { value: number; labels: Record<string, string | number | undefined>; metricName?: string };
type Snapshot = Map<string, number>;

const eventTypeOf = (event: unknown): string | null =>
  event !== null && typeof event === 'object' && typeof (event as { event_type?: unknown }).event_type === 'string'
    ? (event as { event_type: string }).event_type
    : null;

export class LiveRecorder implements IngestObserver {
  readonly wantsEvents: boolean;
  readonly #metrics: ServiceMetrics;
  #previous: Snapshot | null = null;
  #dataSets = new Map<string, DataSetDelta>();
  #rejections: RejectionEntry[] = [];
  #testEvents: TestEventEntry[] = [];
  #unauthenticated: RequestFailureEntry[] = [];

  constructor(metrics: ServiceMetrics, options: { testEnvironment: boolean }) {
    this.#metrics = metrics;
    this.wantsEvents = options.testEnvironment;
  }

  #dataSet(id: string): DataSetDelta {
    let entry = this.#dataSets.get(id);
    if (!entry) this.#dataSets.set(id, (entry = emptyDataSet()));
    return entry;
  }

  validated(request: ObservedRequest): void {
    const entry = this.#dataSet(request.dataSetId);
    entry.accepted += request.accepted;
    entry.rejected += request.errors.length;
    for (const meta of request.metas) if (meta?.consent?.decision === 'measurement_only') entry.measurement_only++;
    for (const { reason } of request.errors) entry.reasons[reason] = (entry.reasons[reason] ?? 0) + 1;
    // Keep only what can be shown: the newest few per second.
    for (const error of request.errors.slice(-MAX_REJECTIONS_PER_DATA_SET)) {
      this.#rejections.push({ at: request.receivedAtMs, data_set_id: request.dataSetId, request_id: request.requestId, index: error.index, event_id: displayedEventId(error.event_id), error: error.error });
    }
    if (this.#rejections.length > 4 * MAX_REJECTIONS_PER_DATA_SET) this.#rejections = this.#rejections.slice(-MAX_REJECTIONS_PER_DATA_SET * 2);
    if (this.wantsEvents) this.#recordTestEvents(request);
  }

  /** Per-event outcome in request order (accepted events fill the indexes without an error); the newest MAX_TEST_EVENTS only. */
  #recordTestEvents(request: ObservedRequest): void {
    const failed = new Map(request.errors.map((e, i) => [e.index, i]));
    const total = request.accepted + request.errors.length;
    const events = request.events ?? [];
    const rejectedEvents = request.rejectedEvents ?? [];
    const from = Math.max(0, total - MAX_TEST_EVENTS);
    const base = { at: request.receivedAtMs, data_set_id: request.dataSetId, key_id: request.keyId, request_id: request.requestId };
    let position = 0;
    for (let index = 0; index < total; index++) {
      const errorAt = failed.get(index);
      if (errorAt !== undefined) {
        if (index < from) continue;
        const error = request.errors[errorAt]!;
        const raw = rejectedEvents[errorAt];
        this.#testEvents.push({ ...base, index, event_id: eventIdForDisplay(raw, error.event_id), event_type: eventTypeOf(raw), outcome: 'rejected', error: error.error, ...rejectedEventForDisplay(raw) });
        continue;
      }
      const event = events[position++];
      if (index < from) continue;
      this.#testEvents.push({
        ...base,
        index,
        event_id: event ? eventIdForDisplay(event) : null,
        event_type: eventTypeOf(event),
        outcome: 'accepted',
        ...(event ? eventForDisplay(event) : {}),
      });
    }
    if (this.#testEvents.length > MAX_TEST_EVENTS) this.#testEvents = this.#testEvents.slice(-MAX_TEST_EVENTS);
  }

  requestFailed(failure: ObservedFailure): void {
    if (!this.wantsEvents) return;
    const entry = requestFailureEntry(failure);
    if (entry.authenticated) {
      this.#testEvents.push(entry);
      if (this.#testEvents.length > MAX_TEST_EVENTS) this.#testEvents = this.#testEvents.slice(-MAX_TEST_EVENTS);
    } else {
      this.#unauthenticated.push(entry);
      if (this.#unauthenticated.length > MAX_UNAUTHENTICATED_FAILURES) this.#unauthenticated.shift();
    }
  }

  rateLimited(dataSetId: string): void {
    this.#dataSet(dataSetId).rate_limited++;
  }

  async #snapshot(): Promise<Snapshot> {
    const out: Snapshot = new Map();
    const put = (prefix: string, values: MetricValue[]) => {
      for (const v of values) {
        const label = v.labels.status ?? v.labels.reason ?? v.labels.limit ?? v.labels.le ?? '';
        out.set(`${prefix}${v.metricName ?? ''}|${label}`, v.value);
      }
    };
    const m = this.#metrics;
    // All read in one synchronous step (get() reads its values before its first await): awaited
    // one after another, a request answered in between showed in one figure a second before another.
    const [req, acc, rej, rl, lat, app] = await Promise.all([
      m.requests.get(), m.eventsAccepted.get(), m.eventsRejected.get(), m.rateLimited.get(), m.requestDuration.get(), m.queueAppendDuration.get(),
    ]);
    put('req', req.values as MetricValue[]);
    put('acc', acc.values as MetricValue[]);
    put('rej', rej.values as MetricValue[]);
    put('rl', rl.values as MetricValue[]);
    put('lat', lat.values as MetricValue[]);
    put('app', app.values as MetricValue[]);
    return out;
  }

  /** What happened since the previous call. */
  async collect(nowMs = Date.now()): Promise<LiveDelta> {
    const current = await this.#snapshot();
    const previous = this.#previous ?? new Map();
    this.#previous = current;
    const diff = (key: string) => (current.get(key) ?? 0) - (previous.get(key) ?? 0);
    const byLabel = (prefix: string): Record<string, number> => {
      const out: Record<string, number> = {};
      for (const key of current.keys()) {
        if (!key.startsWith(prefix)) continue;
        const n = diff(key);
        if (n > 0) out[key.slice(key.indexOf('|') + 1)] = n;
      }
      return out;
    };
    const histogram = (prefix: string, name: string): CumulativeHistogram | null => {
      const bounds: number[] = [];
      const counts: number[] = [];
      for (const key of current.keys()) {
        if (!key.startsWith(`${prefix}${name}_bucket|`)) continue;
        const le = key.slice(key.indexOf('|') + 1);
        if (le !== '+Inf') bounds.push(Number(le));
        counts.push(diff(key));
      }
      if ((counts[counts.length - 1] ?? 0) === 0) return null;
      return { bounds, counts, sum: diff(`${prefix}${name}_sum|`) };
    };
    const accepted = diff('acc|');
    const delta: LiveDelta = {
      at: nowMs,
      pid: process.pid,
      requests: byLabel('req'),
      latency: histogram('lat', 'ecapi_request_duration_seconds'),
      append: histogram('app', 'ecapi_queue_append_seconds'),
      accepted,
      rejected: byLabel('rej'),
      rate_limited: byLabel('rl'),
      data_sets: Object.fromEntries(this.#dataSets),
      rejections: this.#rejections,
      test_events: this.#testEvents,
      unauthenticated_failures: this.#unauthenticated,
    };
    this.#dataSets = new Map();
    this.#rejections = [];
    this.#testEvents = [];
    this.#unauthenticated = [];
    return delta;
  }
}

/** Collects a delta every `intervalMs` and hands it to `sink`; returns a stop function. */
export function startLiveLoop(recorder: LiveRecorder, sink: (delta: LiveDelta) => void, intervalMs = SECOND): () => void {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    recorder
      .collect()
      .then(sink, () => undefined)
      .finally(() => (running = false));
  }, intervalMs);
  timer.unref();
  // The first sample is the baseline: counts before it belong to no second.
  void recorder.collect();
  return () => clearInterval(timer);
}
