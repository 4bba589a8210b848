/**
 * The stats document of a data set (`stats`, the console, `GET /api/stats/:id`), read from its
 * hourly counter rows (model/hourly-counters.ts: the names and what writes them), view and ingest
 * rows together, and the match-quality formula it reports. Pure functions of the rows.
 */
import { addCounter, hourOf, type CounterRow, type Counters } from '../model/hourly-counters.js';
import { COVERAGE_FIELDS, type CoverageField } from '../merged-view/identity.js';
import { reasonGroupOf } from './reason-groups.js';

/**
 * Match quality, 0 to 10, of the events of one type: 10 × the weighted identifier coverage,
 * where coverage of a kind is the share of the events carrying it and the weights sum to 1.
 * A type whose every event has email, phone, customer id, click id, address and IP + user agent
 * scores 10; one with none of them scores 0. Rounded to one decimal.
 */
export const MATCH_QUALITY_WEIGHTS: Readonly<Record<CoverageField, number>> = Object.freeze({
  email: 0.3,
  phone: 0.2,
  customer_id: 0.15,
  click_id: 0.15,
  address: 0.1,
  ip_user_agent: 0.1,
});

/**
 * The score from the counts themselves, never from rounded shares: `counts[kind]` events of
 * `events` carry each identifier kind. Integer arithmetic (weights in hundredths) up to ONE
 * division and ONE rounding: score in tenths = Σ weight×100 × count / events, rounded half up. The
 * quotient is exact whenever the true value sits on a half, so 10 × 0.15 × 5/6 = 1.25 gives 1.3
 * (from coverage shares rounded to 4 decimals first it came out 1.2).
 */
export function matchQuality(counts: Readonly<Record<CoverageField, number>>, events: number): number {
  if (events <= 0) return 0;
  let weighted = 0;
  for (const field of COVERAGE_FIELDS) weighted += Math.round(MATCH_QUALITY_WEIGHTS[field] * 100) * (counts[field] ?? 0);
  return Math.round(weighted / events) / 10;
}

export interface StatsFigures {
  events: number;
  received: number;
  merged_duplicates: number;
  discarded_after_merge_window: number;
  /** Records dropped before the merged view because they carried a suppressed identifier. */
  suppressed: number;
  by_event_type: Record<string, number>;
  by_source: Record<string, number>;
  value_by_currency: Record<string, number>;
  ingest: { accepted: number; rejected: number; rejections: Record<string, number> };
  identifier_coverage: Record<CoverageField, number>;
  /** Match quality of all events together (0 without events), from the counts like the per-type scores. */
  match_quality_score: number;
  measurement_only_share: number;
  match_quality: Record<string, { events: number; score: number; coverage: Record<CoverageField, number> }>;
}

export interface StatsDocument {
  readonly data_set_id: string;
  readonly since: string;
  readonly totals: StatsFigures;
  readonly hours: ({ hour: string } & StatsFigures)[];
}

const share = (part: number, whole: number) => (whole === 0 ? 0 : Math.round((part / whole) * 10_000) / 10_000);

function sortedRecord(map: Map<string, number>, scale = 1): Record<string, number> {
  const out: Record<string, number> = {};
  for (const key of [...map.keys()].sort()) {
    const n = map.get(key)!;
    if (n !== 0) out[key] = scale === 1 ? n : n / scale;
  }
  return out;
}

/** Figures from the summed counters of one hour or of a whole range. */
export function figuresOf(counters: Counters): StatsFigures {
  const get = (name: string) => counters.get(name) ?? 0;
  const byType = new Map<string, number>();
  const bySource = new Map<string, number>();
  const value = new Map<string, number>();
  const reasons = new Map<string, number>();
  const cov = new Map<string, Map<CoverageField, number>>();
  for (const [name, n] of counters) {
    if (name.startsWith('type:')) byType.set(name.slice(5), n);
    else if (name.startsWith('source:')) bySource.set(name.slice(7), n);
    else if (name.startsWith('value:')) value.set(name.slice(6), n);
    else if (name.startsWith('reason:')) {
      // Re-grouped on read: older rows may hold unmasked messages, now merged with their masked group.
      const group = reasonGroupOf(name.slice(7));
      reasons.set(group, (reasons.get(group) ?? 0) + n);
    }
    else if (name.startsWith('cov:')) {
      const at = name.lastIndexOf(':');
      const type = name.slice(4, at);
      const field = name.slice(at + 1) as CoverageField;
      if (!cov.has(type)) cov.set(type, new Map());
      cov.get(type)!.set(field, n);
    }
  }
  const events = get('events');
  const overall = {} as Record<CoverageField, number>;
  const overallCounts = {} as Record<CoverageField, number>;
  for (const field of COVERAGE_FIELDS) {
    let sum = 0;
    for (const m of cov.values()) sum += m.get(field) ?? 0;
    overallCounts[field] = sum;
    overall[field] = share(sum, events);
  }
  const quality: StatsFigures['match_quality'] = {};
  for (const type of [...byType.keys()].sort()) {
    const count = byType.get(type)!;
    if (count === 0) continue;
    const shares = {} as Record<CoverageField, number>;
    const counts = {} as Record<CoverageField, number>;
    for (const field of COVERAGE_FIELDS) {
      counts[field] = cov.get(type)?.get(field) ?? 0;
      shares[field] = share(counts[field], count);
    }
    quality[type] = { events: count, score: matchQuality(counts, count), coverage: shares };
  }
  return {
    events,
    received: get('received'),
    merged_duplicates: get('merged'),
    discarded_after_merge_window: get('discarded'),
    suppressed: get('suppressed'),
    by_event_type: sortedRecord(byType),
    by_source: sortedRecord(bySource),
    value_by_currency: sortedRecord(value, 1_000_000),
    ingest: { accepted: get('accepted'), rejected: get('rejected'), rejections: sortedRecord(reasons) },
    identifier_coverage: overall,
    match_quality_score: matchQuality(overallCounts, events),
    measurement_only_share: share(get('mmt'), events),
    match_quality: quality,
  };
}

/** The stats document of a data set from its counter rows (view and ingest rows together). */
export function statsDocument(dataSetId: string, sinceMs: number, rows: readonly CounterRow[]): StatsDocument {
  const byHour = new Map<number, Counters>();
  const totals: Counters = new Map();
  for (const row of rows) {
    if (row.hour < hourOf(sinceMs)) continue;
    if (!byHour.has(row.hour)) byHour.set(row.hour, new Map());
    addCounter(byHour.get(row.hour)!, row.name, row.n);
    addCounter(totals, row.name, row.n);
  }
  return {
    data_set_id: dataSetId,
    since: new Date(hourOf(sinceMs)).toISOString(),
    totals: figuresOf(totals),
    hours: [...byHour.keys()].sort((a, b) => a - b).map((hour) => ({ hour: new Date(hour).toISOString(), ...figuresOf(byHour.get(hour)!) })),
  };
}
