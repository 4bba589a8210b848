/**
 * Live figures for the operator console (issue 10): the last hour in memory, per node.
 *
 *   serving process                                         process that owns the admin port
 *   LiveRecorder ── every second: LiveDelta ──(IPC with --workers N, a call otherwise)──▶ LiveStore
 *
 * - `LiveRecorder` (one per serving process) samples the process's own Prometheus metrics once a
 *   second (requests by status, the latency and queue-append histograms, events accepted/rejected,
 *   429s) and diffs them against the previous sample, so the hot path does no extra work for the
 *   node-wide series. As the request path's `IngestObserver` it also collects what Prometheus labels
 *   must not carry: per-data-set counts (accepted, rejected by reason, 429s, measurement-only),
 *   the most recent rejection messages (index, event id, error; never a body), and, in the test
 *   environment only, the accepted events as queued.
 * - `LiveStore` (in the single process, or in the primary of `serve --workers N`, which receives
 *   every worker's deltas over the cluster IPC channel) sums the deltas into ring buffers: one-second
 *   buckets for the node (1 h), one-minute buckets per data set (1 h), the last 50 rejections per
 *   data set and the last 200 test-environment events. It answers the console API's queries.
 *
 * Everything is lost on restart by design: the durable figures (events today, acceptance rate, match
 * quality, hourly history) come from ingest-stats.db and view.db through the StatsReader.
 */
import type { ServiceMetrics } from './service-metrics.js';
import { rejectionReasonOf } from './service-metrics.js';
import type { IngestObserver, ObservedRequest } from '../analytics/ingest-observer.js';

const SECOND = 1000;
const MINUTE = 60_000;
export const LIVE_WINDOW_MS = 3_600_000;
const MAX_REJECTIONS_PER_DATA_SET = 50;
const MAX_TEST_EVENTS = 200;
const MAX_TEST_EVENT_BYTES = 32 * 1024;
const MAX_DATA_SETS = 10_000;

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

export interface RejectionEntry {
  readonly at: number;
  readonly data_set_id: string;
  readonly request_id: string;
  readonly index: number;
  readonly event_id: string | null;
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
  /** The accepted event as queued, for display: non-hashed identifier fields masked. */
  readonly event?: Record<string, unknown>;
  readonly event_omitted?: string;
}

/** What one serving process observed during about one second. Plain JSON: it crosses the IPC. */
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

// ---------------------------------------------------------------------------------------------
// Recorder (every serving process)

type MetricValue = { value: number; labels: Record<string, string | number | undefined>; metricName?: string };
type Snapshot = Map<string, number>;

const HEX64 = /^[0-9a-f]{64}$/i;
const SHOWN_PLAIN = new Set(['address_type', 'source', 'country_code', 'mmt_only']);

/** `user_data` for display: strings that are not SHA-256 digests are replaced by a marker. */
function maskUserData(value: unknown, key = ''): unknown {
  if (typeof value === 'string') return HEX64.test(value) || SHOWN_PLAIN.has(key) ? value : `‹not shown: ${value.length} characters›`;
  if (Array.isArray(value)) return value.map((v) => maskUserData(v, key));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = maskUserData(v, k);
    return out;
  }
  return value;
}

export function eventForDisplay(event: Record<string, unknown>): { event?: Record<string, unknown>; event_omitted?: string } {
  const text = JSON.stringify(event);
  if (text.length > MAX_TEST_EVENT_BYTES) return { event_omitted: `event larger than ${MAX_TEST_EVENT_BYTES / 1024} KB` };
  const copy = JSON.parse(text) as Record<string, unknown>;
  if ('user_data' in copy) copy.user_data = maskUserData(copy.user_data);
  return { event: copy };
}

function emptyDataSet(): DataSetDelta {
  return { accepted: 0, rejected: 0, reasons: {}, rate_limited: 0, measurement_only: 0 };
}

export class LiveRecorder implements IngestObserver {
  readonly wantsEvents: boolean;
  readonly #metrics: ServiceMetrics;
  #previous: Snapshot | null = null;
  #dataSets = new Map<string, DataSetDelta>();
  #rejections: RejectionEntry[] = [];
  #testEvents: TestEventEntry[] = [];

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
    for (const error of request.errors) {
      const reason = rejectionReasonOf(error.error);
      entry.reasons[reason] = (entry.reasons[reason] ?? 0) + 1;
    }
    // Keep only what can be shown: the newest few per second.
    for (const error of request.errors.slice(-MAX_REJECTIONS_PER_DATA_SET)) {
      this.#rejections.push({ at: request.receivedAtMs, data_set_id: request.dataSetId, request_id: request.requestId, ...error });
    }
    if (this.#rejections.length > 4 * MAX_REJECTIONS_PER_DATA_SET) this.#rejections = this.#rejections.slice(-MAX_REJECTIONS_PER_DATA_SET * 2);
    if (!this.wantsEvents) return;
    // Per-event outcome in request order: accepted events fill the indexes without an error.
    const failed = new Map(request.errors.map((e) => [e.index, e]));
    const total = request.accepted + request.errors.length;
    const events = request.events ?? [];
    const from = Math.max(0, total - MAX_TEST_EVENTS);
    const base = { at: request.receivedAtMs, data_set_id: request.dataSetId, key_id: request.keyId, request_id: request.requestId };
    let position = 0;
    for (let index = 0; index < total; index++) {
      const error = failed.get(index);
      if (error) {
        if (index >= from) this.#testEvents.push({ ...base, index, event_id: error.event_id, event_type: null, outcome: 'rejected', error: error.error });
        continue;
      }
      const event = events[position++];
      if (index < from) continue;
      this.#testEvents.push({
        ...base,
        index,
        event_id: typeof event?.id === 'string' ? event.id : null,
        event_type: typeof event?.event_type === 'string' ? event.event_type : null,
        outcome: 'accepted',
        ...(event ? eventForDisplay(event) : {}),
      });
    }
    if (this.#testEvents.length > MAX_TEST_EVENTS) this.#testEvents = this.#testEvents.slice(-MAX_TEST_EVENTS);
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
    };
    this.#dataSets = new Map();
    this.#rejections = [];
    this.#testEvents = [];
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

// ---------------------------------------------------------------------------------------------
// Store (the process with the admin port)

class TimeRing<B> {
  readonly #slots: ({ t: number; b: B } | undefined)[];
  constructor(
    readonly stepMs: number,
    readonly size: number,
    readonly make: () => B,
  ) {
    this.#slots = new Array(size);
  }

  bucket(atMs: number): B {
    const t = Math.floor(atMs / this.stepMs) * this.stepMs;
    const i = Math.floor(atMs / this.stepMs) % this.size;
    const slot = this.#slots[i];
    if (slot && slot.t === t) return slot.b;
    const fresh = { t, b: this.make() };
    this.#slots[i] = fresh;
    return fresh.b;
  }

  get(t: number): B | undefined {
    const slot = this.#slots[Math.floor(t / this.stepMs) % this.size];
    return slot && slot.t === t ? slot.b : undefined;
  }

  /** Bucket starts from the one holding `fromMs` to the one holding `toMs`. */
  starts(fromMs: number, toMs: number): number[] {
    const out: number[] = [];
    for (let t = Math.floor(fromMs / this.stepMs) * this.stepMs; t <= toMs; t += this.stepMs) out.push(t);
    return out;
  }
}

interface NodeBucket {
  requests: Record<string, number>;
  latency: number[];
  latencySum: number;
  append: number[];
  appendSum: number;
  accepted: number;
  rejected: Record<string, number>;
  rateLimited: Record<string, number>;
}

const emptyNodeBucket = (): NodeBucket => ({ requests: {}, latency: [], latencySum: 0, append: [], appendSum: 0, accepted: 0, rejected: {}, rateLimited: {} });

function addInto(target: Record<string, number>, source: Record<string, number>): void {
  for (const [k, n] of Object.entries(source)) target[k] = (target[k] ?? 0) + n;
}

function addCounts(target: number[], source: readonly number[]): void {
  for (let i = 0; i < source.length; i++) target[i] = (target[i] ?? 0) + source[i]!;
}

const sumOf = (record: Record<string, number>) => Object.values(record).reduce((a, b) => a + b, 0);
const round = (n: number, digits = 2) => Math.round(n * 10 ** digits) / 10 ** digits;

/** Quantile (ms) from cumulative bucket counts, interpolated within the bucket (as histogram_quantile). */
export function quantileMs(bounds: readonly number[], counts: readonly number[], q: number): number | null {
  const total = counts[counts.length - 1] ?? 0;
  if (total === 0) return null;
  const rank = q * total;
  for (let i = 0; i < counts.length; i++) {
    if (counts[i]! >= rank) {
      if (i >= bounds.length) return round(bounds[bounds.length - 1]! * 1000, 3);
      const lower = i === 0 ? 0 : bounds[i - 1]!;
      const below = i === 0 ? 0 : counts[i - 1]!;
      const inBucket = counts[i]! - below;
      const fraction = inBucket === 0 ? 1 : (rank - below) / inBucket;
      return round((lower + (bounds[i]! - lower) * fraction) * 1000, 3);
    }
  }
  return null;
}

export function statusClass(status: string): '2xx' | '4xx' | '429' | '5xx' | 'other' {
  if (status === '429') return '429';
  if (status.startsWith('2')) return '2xx';
  if (status.startsWith('4')) return '4xx';
  if (status.startsWith('5')) return '5xx';
  return 'other';
}

export interface DataSetLive {
  readonly step_seconds: number;
  readonly t: number[];
  readonly accepted: number[];
  readonly rejected: number[];
  readonly rejected_by_reason: Record<string, number[]>;
  readonly rate_limited: number[];
  readonly measurement_only: number[];
  readonly last_hour: DataSetDelta;
  readonly rate_limited_since_start: number;
  readonly recent_rejections: RejectionEntry[];
}

export class LiveStore {
  readonly env: string;
  readonly startedAt = Date.now();
  readonly #node = new TimeRing<NodeBucket>(SECOND, LIVE_WINDOW_MS / SECOND + 5, emptyNodeBucket);
  readonly #dataSets = new Map<string, TimeRing<DataSetDelta>>();
  readonly #rejections = new Map<string, RejectionEntry[]>();
  readonly #rateLimitedTotal = new Map<string, number>();
  #testEvents: TestEventEntry[] = [];
  /** Serving process → when it last reported, and when it last served a request. */
  readonly #processes = new Map<number, { seen: number; traffic: number }>();
  #latencyBounds: number[] = [];
  #appendBounds: number[] = [];

  constructor(options: { env: string }) {
    this.env = options.env;
  }

  add(delta: LiveDelta): void {
    const now = Date.now();
    // A delta is stamped when it was collected; one older than the window is dropped.
    const at = Math.min(delta.at, now);
    if (at < now - LIVE_WINDOW_MS) return;
    const proc = this.#processes.get(delta.pid) ?? { seen: 0, traffic: 0 };
    proc.seen = now;
    if (Object.keys(delta.requests).length > 0) proc.traffic = now;
    this.#processes.set(delta.pid, proc);
    for (const [pid, p] of this.#processes) if (p.seen < now - LIVE_WINDOW_MS) this.#processes.delete(pid);
    const bucket = this.#node.bucket(at);
    addInto(bucket.requests, delta.requests);
    if (delta.latency) {
      this.#latencyBounds = delta.latency.bounds;
      addCounts(bucket.latency, delta.latency.counts);
      bucket.latencySum += delta.latency.sum;
    }
    if (delta.append) {
      this.#appendBounds = delta.append.bounds;
      addCounts(bucket.append, delta.append.counts);
      bucket.appendSum += delta.append.sum;
    }
    bucket.accepted += delta.accepted;
    addInto(bucket.rejected, delta.rejected);
    addInto(bucket.rateLimited, delta.rate_limited);
    for (const [id, d] of Object.entries(delta.data_sets)) {
      let ring = this.#dataSets.get(id);
      if (!ring) {
        if (this.#dataSets.size >= MAX_DATA_SETS) continue;
        this.#dataSets.set(id, (ring = new TimeRing<DataSetDelta>(MINUTE, LIVE_WINDOW_MS / MINUTE + 2, emptyDataSet)));
      }
      const b = ring.bucket(at);
      b.accepted += d.accepted;
      b.rejected += d.rejected;
      b.rate_limited += d.rate_limited;
      b.measurement_only += d.measurement_only;
      addInto(b.reasons, d.reasons);
      if (d.rate_limited) this.#rateLimitedTotal.set(id, (this.#rateLimitedTotal.get(id) ?? 0) + d.rate_limited);
    }
    for (const r of delta.rejections) {
      if (!this.#dataSets.has(r.data_set_id)) continue;
      let list = this.#rejections.get(r.data_set_id);
      if (!list) this.#rejections.set(r.data_set_id, (list = []));
      list.push(r);
      if (list.length > MAX_REJECTIONS_PER_DATA_SET) list.splice(0, list.length - MAX_REJECTIONS_PER_DATA_SET);
    }
    // Test events are kept only by a test-environment store, whatever a process sends.
    if (this.env === 'test' && delta.test_events.length > 0) {
      this.#testEvents.push(...delta.test_events);
      if (this.#testEvents.length > MAX_TEST_EVENTS) this.#testEvents = this.#testEvents.slice(-MAX_TEST_EVENTS);
      this.#testEvents.sort((a, b) => a.at - b.at);
    }
  }

  #sum(fromMs: number, toMs: number): NodeBucket {
    const total = emptyNodeBucket();
    for (const t of this.#node.starts(fromMs, toMs)) {
      const b = this.#node.get(t);
      if (!b) continue;
      addInto(total.requests, b.requests);
      addCounts(total.latency, b.latency);
      addCounts(total.append, b.append);
      total.latencySum += b.latencySum;
      total.appendSum += b.appendSum;
      total.accepted += b.accepted;
      addInto(total.rejected, b.rejected);
      addInto(total.rateLimited, b.rateLimited);
    }
    return total;
  }

  /** Headline figures: rates over the last 10 s, percentiles over the last 60 s, counts over 5 min and 1 h. */
  overview(nowMs = Date.now()) {
    const rateWindow = 10;
    const recent = this.#sum(nowMs - rateWindow * SECOND + 1, nowMs);
    const minute = this.#sum(nowMs - 60 * SECOND + 1, nowMs);
    const fiveMinutes = this.#sum(nowMs - 300 * SECOND + 1, nowMs);
    const hour = this.#sum(nowMs - LIVE_WINDOW_MS + 1, nowMs);
    const rejectedRecent = sumOf(recent.rejected);
    return {
      rate_window_seconds: rateWindow,
      requests_per_second: round(sumOf(recent.requests) / rateWindow),
      events_per_second: { accepted: round(recent.accepted / rateWindow), rejected: round(rejectedRecent / rateWindow) },
      latency_ms: {
        window_seconds: 60,
        p50: quantileMs(this.#latencyBounds, minute.latency, 0.5),
        p99: quantileMs(this.#latencyBounds, minute.latency, 0.99),
      },
      queue_append_ms: {
        window_seconds: 60,
        p50: quantileMs(this.#appendBounds, minute.append, 0.5),
        p99: quantileMs(this.#appendBounds, minute.append, 0.99),
      },
      status_codes: { last_5_minutes: fiveMinutes.requests, last_hour: hour.requests },
      last_hour: {
        requests: sumOf(hour.requests),
        events_accepted: hour.accepted,
        events_rejected: sumOf(hour.rejected),
        rejected_by_reason: hour.rejected,
        rate_limited: hour.rateLimited,
      },
      live_since: new Date(this.startedAt).toISOString(),
      serving_processes: {
        reporting: [...this.#processes.values()].filter((p) => p.seen >= nowMs - 5 * SECOND).length,
        with_traffic_last_hour: [...this.#processes.values()].filter((p) => p.traffic >= nowMs - LIVE_WINDOW_MS).length,
      },
    };
  }

  /** Series over `windowMs` in steps of `stepMs` (whole seconds): rates per second and percentiles in ms. */
  timeseries(windowMs: number, stepMs: number, nowMs = Date.now()) {
    const end = Math.floor(nowMs / stepMs) * stepMs;
    const start = end - windowMs + stepMs;
    const t: number[] = [];
    const series = {
      requests_2xx: [] as number[],
      requests_4xx: [] as number[],
      requests_429: [] as number[],
      requests_5xx: [] as number[],
      events_accepted: [] as number[],
      events_rejected: [] as number[],
      latency_p50_ms: [] as (number | null)[],
      latency_p99_ms: [] as (number | null)[],
      queue_append_p50_ms: [] as (number | null)[],
      queue_append_p99_ms: [] as (number | null)[],
    };
    const perSecond = stepMs / SECOND;
    for (let s = start; s <= end; s += stepMs) {
      const b = this.#sum(s, Math.min(s + stepMs - 1, nowMs));
      const classes = { '2xx': 0, '4xx': 0, '429': 0, '5xx': 0, other: 0 };
      for (const [status, n] of Object.entries(b.requests)) classes[statusClass(status)] += n;
      t.push(s / 1000);
      // The step still running is divided by its elapsed seconds, so the last point is a rate too.
      const seconds = s === end ? Math.max(1, (nowMs - s) / SECOND) : perSecond;
      series.requests_2xx.push(round(classes['2xx'] / seconds));
      series.requests_4xx.push(round((classes['4xx'] + classes.other) / seconds));
      series.requests_429.push(round(classes['429'] / seconds));
      series.requests_5xx.push(round(classes['5xx'] / seconds));
      series.events_accepted.push(round(b.accepted / seconds));
      series.events_rejected.push(round(sumOf(b.rejected) / seconds));
      series.latency_p50_ms.push(quantileMs(this.#latencyBounds, b.latency, 0.5));
      series.latency_p99_ms.push(quantileMs(this.#latencyBounds, b.latency, 0.99));
      series.queue_append_p50_ms.push(quantileMs(this.#appendBounds, b.append, 0.5));
      series.queue_append_p99_ms.push(quantileMs(this.#appendBounds, b.append, 0.99));
    }
    return { window_seconds: windowMs / SECOND, step_seconds: stepMs / SECOND, t, series };
  }

  /** Per-minute series of one data set over the last hour, its totals, and its recent rejections. */
  dataSet(id: string, nowMs = Date.now()): DataSetLive {
    const ring = this.#dataSets.get(id);
    const end = Math.floor(nowMs / MINUTE) * MINUTE;
    const t: number[] = [];
    const accepted: number[] = [];
    const rejected: number[] = [];
    const rateLimited: number[] = [];
    const measurementOnly: number[] = [];
    const reasons: Record<string, number[]> = {};
    const total = emptyDataSet();
    const starts: number[] = [];
    for (let s = end - LIVE_WINDOW_MS + MINUTE; s <= end; s += MINUTE) starts.push(s);
    const buckets = starts.map((s) => ring?.get(s));
    for (const b of buckets) for (const reason of Object.keys(b?.reasons ?? {})) reasons[reason] ??= [];
    buckets.forEach((b, i) => {
      t.push(starts[i]! / 1000);
      accepted.push(b?.accepted ?? 0);
      rejected.push(b?.rejected ?? 0);
      rateLimited.push(b?.rate_limited ?? 0);
      measurementOnly.push(b?.measurement_only ?? 0);
      for (const [reason, list] of Object.entries(reasons)) list.push(b?.reasons[reason] ?? 0);
      if (b) {
        total.accepted += b.accepted;
        total.rejected += b.rejected;
        total.rate_limited += b.rate_limited;
        total.measurement_only += b.measurement_only;
        addInto(total.reasons, b.reasons);
      }
    });
    return {
      step_seconds: MINUTE / SECOND,
      t,
      accepted,
      rejected,
      rejected_by_reason: reasons,
      rate_limited: rateLimited,
      measurement_only: measurementOnly,
      last_hour: total,
      rate_limited_since_start: this.#rateLimitedTotal.get(id) ?? 0,
      recent_rejections: [...(this.#rejections.get(id) ?? [])].reverse(),
    };
  }

  /** The test environment's last events, newest first; empty in production. */
  testEvents(limit = MAX_TEST_EVENTS): TestEventEntry[] {
    return this.#testEvents.slice(-limit).reverse();
  }
}
