/**
 * The admin side of the console's live figures (see live-stats.ts): `LiveStore` sums the serving
 * processes' one-second deltas into ring buffers (one-second buckets for the node, one-minute
 * buckets per data set, both one hour deep), keeps the last rejections per data set and, in the
 * test environment, the last events and request-level failures, and answers the console API's
 * queries.
 *
 * Test environment (issue 31): two lists, each bounded. `#testEvents` holds what signed senders
 * caused (per-event outcomes, and request-level failures of requests whose HMAC verified), the
 * newest MAX_TEST_EVENTS; `#unauthenticated` holds request-level failures before authentication,
 * a fixed ring of MAX_UNAUTHENTICATED_FAILURES whose entries have every field cut to a bound
 * (request-failure.ts), so unauthenticated traffic can neither grow memory nor push a signed
 * sender's entries out. `resetTestEvents()` empties both and drops whatever a serving process
 * still reports from before the reset (entries are stamped when their request was received).
 *
 * Deletions reach this memory (issue 29's promise, "a deletion leaves no byte behind", holds for it
 * too): the test environment's list and, in both environments, the recent rejections (an event id a
 * sender deleted is not shown afterwards). `erase()` takes erasures that live/console-deletions.ts
 * builds from the deletion requests (`events delete`, `identities forget`) it reads from the
 * lifecycle store; which entries a request covers, and from when, is decided there, the store only
 * applies it. Invariants:
 * - an entry an erasure covers is removed at once, and dropped when a serving process reports it
 *   later (stamped at or before the erasure's `throughMs`: the same stamp rule as the reset, per
 *   erasure and per data set); an entry received after `throughMs` is an event sent after the
 *   request, and stays;
 * - bounded: an erasure is remembered ERASURE_MEMORY_MS (processes report every second), at most
 *   MAX_ERASURES of them; a forgotten one leaves its `throughMs` as its data set's horizon, and an
 *   entry of that data set stamped at or before the horizon is dropped on arrival whatever it
 *   holds. So nothing a deletion covered can come back however late it is reported, at the cost
 *   of dropping, too, an unrelated entry reported more than a minute late (or after a burst of
 *   more than MAX_ERASURES requests): the conservative side;
 * - the signed senders' list and the recent rejections only: failures before authentication carry
 *   no event (no body, no id).
 * Nothing here is on the request path: erasures are checked when a delta is added (once a second
 * per serving process) and when a request's erasure is applied.
 *
 * Series cover the whole window, but a bucket that ended before the store started is `null`, not
 * 0: nobody was counting then, and a chart must draw a gap there rather than an hour of zeros.
 */
import {
  emptyDataSet, LIVE_WINDOW_MS, MAX_DATA_SETS, MAX_REJECTIONS_PER_DATA_SET, MAX_TEST_EVENTS, MAX_UNAUTHENTICATED_FAILURES,
  type DataSetDelta, type LiveDelta, type RejectionEntry, type RequestFailureEntry, type TestEventEntry,
} from './live-delta.js';

const SECOND = 1000;
const MINUTE = 60_000;

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
  readonly accepted: (number | null)[];
  readonly rejected: (number | null)[];
  readonly rejected_by_reason: Record<string, (number | null)[]>;
  readonly rate_limited: (number | null)[];
  readonly measurement_only: (number | null)[];
  readonly last_hour: DataSetDelta;
  readonly rate_limited_since_start: number;
  readonly recent_rejections: RejectionEntry[];
}

export class LiveStore {
  readonly env: string;
  readonly startedAt: number;
  readonly #node = new TimeRing<NodeBucket>(SECOND, LIVE_WINDOW_MS / SECOND + 5, emptyNodeBucket);
  readonly #dataSets = new Map<string, TimeRing<DataSetDelta>>();
  readonly #rejections = new Map<string, RejectionEntry[]>();
  readonly #rateLimitedTotal = new Map<string, number>();
  #testEvents: TestEventEntry[] = [];
  #unauthenticated: RequestFailureEntry[] = [];
  /** Entries received before this are dropped (the last reset). */
  #resetAt = 0;
  /** Deletions applied, each until it is forgotten (ERASURE_MEMORY_MS after it applies; the oldest past MAX_ERASURES). */
  readonly #erasures = new Map<ConsoleErasure, number>();
  /** Per data set: entries received at or before this are dropped on arrival (a forgotten deletion's `throughMs`). */
  readonly #erasedThrough = new Map<string, number>();
  /** Serving process → when it last reported, and when it last served a request. */
  readonly #processes = new Map<number, { seen: number; traffic: number }>();
  #latencyBounds: number[] = [];
  #appendBounds: number[] = [];

  constructor(options: { env: string; startedAt?: number }) {
    this.env = options.env;
    this.startedAt = options.startedAt ?? Date.now();
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
    if (delta.rejections.length > 0 || (this.env === 'test' && delta.test_events.length > 0)) this.#forgetErasures(now);
    for (const r of delta.rejections) {
      if (!this.#dataSets.has(r.data_set_id) || this.#erasedOnArrival(r)) continue;
      let list = this.#rejections.get(r.data_set_id);
      if (!list) this.#rejections.set(r.data_set_id, (list = []));
      list.push(r);
      if (list.length > MAX_REJECTIONS_PER_DATA_SET) list.splice(0, list.length - MAX_REJECTIONS_PER_DATA_SET);
    }
    // Test events are kept only by a test-environment store, whatever a process sends.
    if (this.env === 'test' && delta.test_events.length > 0) {
      this.#testEvents.push(...delta.test_events.filter((e) => e.at >= this.#resetAt && !this.#erasedOnArrival(e)));
      if (this.#testEvents.length > MAX_TEST_EVENTS) this.#testEvents = this.#testEvents.slice(-MAX_TEST_EVENTS);
      this.#testEvents.sort((a, b) => a.at - b.at);
    }
    const failures = delta.unauthenticated_failures ?? [];
    if (this.env === 'test' && failures.length > 0) {
      for (const f of failures.slice(-MAX_UNAUTHENTICATED_FAILURES)) if (f.at >= this.#resetAt) this.#unauthenticated.push(f);
      if (this.#unauthenticated.length > MAX_UNAUTHENTICATED_FAILURES) this.#unauthenticated = this.#unauthenticated.slice(-MAX_UNAUTHENTICATED_FAILURES);
      this.#unauthenticated.sort((a, b) => a.at - b.at);
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

  /**
   * Series over `windowMs` in steps of `stepMs` (whole seconds): rates per second and percentiles in ms.
   * Steps that ended before the store started are null (nothing was counted then).
   */
  timeseries(windowMs: number, stepMs: number, nowMs = Date.now()) {
    const end = Math.floor(nowMs / stepMs) * stepMs;
    const start = end - windowMs + stepMs;
    const t: number[] = [];
    const series = {
      requests_2xx: [] as (number | null)[],
      requests_4xx: [] as (number | null)[],
      requests_429: [] as (number | null)[],
      requests_5xx: [] as (number | null)[],
      events_accepted: [] as (number | null)[],
      events_rejected: [] as (number | null)[],
      latency_p50_ms: [] as (number | null)[],
      latency_p99_ms: [] as (number | null)[],
      queue_append_p50_ms: [] as (number | null)[],
      queue_append_p99_ms: [] as (number | null)[],
    };
    const counted = Math.floor(this.startedAt / SECOND) * SECOND;
    for (let s = start; s <= end; s += stepMs) {
      t.push(s / 1000);
      if (s + stepMs <= counted) {
        for (const list of Object.values(series)) list.push(null);
        continue;
      }
      const b = this.#sum(s, Math.min(s + stepMs - 1, nowMs));
      const classes = { '2xx': 0, '4xx': 0, '429': 0, '5xx': 0, other: 0 };
      for (const [status, n] of Object.entries(b.requests)) classes[statusClass(status)] += n;
      // A rate is divided by the seconds of its step that were counted: the step still running
      // ends now, and the step the store started in begins then.
      const seconds = Math.max(1, (Math.min(s + stepMs, nowMs) - Math.max(s, counted)) / SECOND);
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

  /** Per-minute series of one data set over the last hour (null before the store started), its totals, and its recent rejections. */
  dataSet(id: string, nowMs = Date.now()): DataSetLive {
    const ring = this.#dataSets.get(id);
    const end = Math.floor(nowMs / MINUTE) * MINUTE;
    const t: number[] = [];
    const accepted: (number | null)[] = [];
    const rejected: (number | null)[] = [];
    const rateLimited: (number | null)[] = [];
    const measurementOnly: (number | null)[] = [];
    const reasons: Record<string, (number | null)[]> = {};
    const total = emptyDataSet();
    const starts: number[] = [];
    for (let s = end - LIVE_WINDOW_MS + MINUTE; s <= end; s += MINUTE) starts.push(s);
    const buckets = starts.map((s) => ring?.get(s));
    for (const b of buckets) for (const reason of Object.keys(b?.reasons ?? {})) reasons[reason] ??= [];
    buckets.forEach((b, i) => {
      t.push(starts[i]! / 1000);
      const before = starts[i]! + MINUTE <= this.startedAt;
      const value = (n: number | undefined) => (before ? null : (n ?? 0));
      accepted.push(value(b?.accepted));
      rejected.push(value(b?.rejected));
      rateLimited.push(value(b?.rate_limited));
      measurementOnly.push(value(b?.measurement_only));
      for (const [reason, list] of Object.entries(reasons)) list.push(value(b?.reasons[reason]));
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

  /**
   * The test environment's last events and request-level failures, newest first, filtered; empty
   * in production. `outcomes`: which of accepted, rejected, failed (all when empty); `eventType`:
   * only events of that type (request-level failures have none); `sinceMs`: received at or after.
   */
  testEvents(filter: TestEventFilter = {}): TestEventEntry[] {
    const { outcomes, eventType, sinceMs, limit = MAX_TEST_EVENTS + MAX_UNAUTHENTICATED_FAILURES } = filter;
    // Newest first; within one request (same `at`) the last event first, as the lists were appended.
    const all: TestEventEntry[] = [...this.#testEvents, ...this.#unauthenticated].reverse().sort((a, b) => b.at - a.at);
    const out: TestEventEntry[] = [];
    for (const e of all) {
      if (out.length >= limit) break;
      if (outcomes && outcomes.size > 0 && !outcomes.has(e.outcome)) continue;
      if (eventType !== undefined && e.event_type !== eventType) continue;
      if (sinceMs !== undefined && e.at < sinceMs) continue;
      out.push(e);
    }
    return out;
  }

  /**
   * Applies deletions (live/console-deletions.ts builds them from the deletion requests) to the
   * recent rejections and, in the test environment, to the signed senders' list: every entry of an
   * erasure's data set received at or before its `throughMs` that it `covers` is removed now, and
   * dropped when a serving process reports it later. An erasure given again (the same object) is
   * applied again, not remembered twice: one whose `covers` learns more (the ids a request
   * deleted) re-applies that way. Returns how many entries were removed.
   */
  erase(erasures: readonly ConsoleErasure[], nowMs = Date.now()): number {
    if (erasures.length === 0) return 0;
    for (const erasure of erasures) {
      if (!this.#erasures.has(erasure)) this.#erasures.set(erasure, Math.max(erasure.throughMs, nowMs) + ERASURE_MEMORY_MS);
    }
    const byDataSet = new Map<string, ConsoleErasure[]>();
    for (const erasure of erasures) {
      const list = byDataSet.get(erasure.dataSetId);
      if (list) list.push(erasure);
      else byDataSet.set(erasure.dataSetId, [erasure]);
    }
    const covered = (entry: ErasableEntry): boolean => {
      const mine = entry.data_set_id === null ? undefined : byDataSet.get(entry.data_set_id);
      return mine?.some((erasure) => entry.at <= erasure.throughMs && erasure.covers(entry)) ?? false;
    };
    let removed = 0;
    for (const [dataSetId, list] of this.#rejections) {
      if (!byDataSet.has(dataSetId)) continue;
      const kept = list.filter((entry) => !covered(entry));
      removed += list.length - kept.length;
      this.#rejections.set(dataSetId, kept);
    }
    if (this.env === 'test') {
      const before = this.#testEvents.length;
      this.#testEvents = this.#testEvents.filter((entry) => !covered(entry));
      removed += before - this.#testEvents.length;
    }
    this.#forgetErasures(nowMs);
    return removed;
  }

  /** What a deletion in a data set is compared with: its recent rejections and (test environment) its signed senders' entries, oldest first. */
  entriesOf(dataSetId: string): readonly ErasableEntry[] {
    return [...(this.#rejections.get(dataSetId) ?? []), ...this.#testEvents.filter((entry) => entry.data_set_id === dataSetId)];
  }

  /** Whether a deletion already applied covers an entry a serving process reports now. */
  #erasedOnArrival(entry: ErasableEntry): boolean {
    const dataSetId = entry.data_set_id;
    if (dataSetId === null) return false;
    if (entry.at <= (this.#erasedThrough.get(dataSetId) ?? Number.NEGATIVE_INFINITY)) return true;
    for (const erasure of this.#erasures.keys()) {
      if (erasure.dataSetId === dataSetId && entry.at <= erasure.throughMs && erasure.covers(entry)) return true;
    }
    return false;
  }

  /**
   * Forgets the deletions past their memory (and the oldest beyond MAX_ERASURES): each leaves its
   * `throughMs` as its data set's horizon, so an entry received before it that is reported even
   * later is still dropped, covered or not (the conservative side: memory stays bounded and nothing
   * a deletion covered can come back).
   */
  #forgetErasures(nowMs: number): void {
    let over = this.#erasures.size - MAX_ERASURES;
    for (const [erasure, until] of this.#erasures) {
      if (until >= nowMs && over <= 0) continue;
      this.#erasures.delete(erasure);
      over--;
      const horizon = this.#erasedThrough.get(erasure.dataSetId) ?? Number.NEGATIVE_INFINITY;
      if (erasure.throughMs > horizon) this.#erasedThrough.set(erasure.dataSetId, erasure.throughMs);
    }
  }

  /** Empties the test environment's lists; entries received before `nowMs` that arrive later are dropped too. Returns how many were removed. */
  resetTestEvents(nowMs = Date.now()): number {
    const removed = this.#testEvents.length + this.#unauthenticated.length;
    this.#testEvents = [];
    this.#unauthenticated = [];
    this.#resetAt = nowMs;
    return removed;
  }
}

/** An entry a deletion may take: one of the recent rejections, or of the test environment's list. */
export type ErasableEntry = RejectionEntry | TestEventEntry;

/**
 * What one deletion request takes out of the console's memory (built by live/console-deletions.ts
 * from the request; the store only applies it).
 */
export interface ConsoleErasure {
  readonly dataSetId: string;
  /** Entries received at or before this (ms) may be covered; later ones are events sent after the request. */
  readonly throughMs: number;
  /** Whether the request covers this entry of its data set (received at or before `throughMs`). */
  covers(entry: ErasableEntry): boolean;
}

/**
 * How long an applied deletion is kept to drop entries a serving process reports late (they report
 * every second, so this is a wide margin); past it the data set's horizon drops them (#forgetErasures).
 */
export const ERASURE_MEMORY_MS = 60_000;
/** Deletions kept at once (a burst of requests forgets the oldest early, into the horizon). */
export const MAX_ERASURES = 1_000;

export interface TestEventFilter {
  readonly outcomes?: ReadonlySet<TestEventEntry['outcome']>;
  readonly eventType?: string;
  readonly sinceMs?: number;
  readonly limit?: number;
}
