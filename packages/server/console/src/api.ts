/** The admin API the page reads: same origin, the session cookie travels by itself. */
export class Unauthorized extends Error {}

export async function getJson<T>(path: string): Promise<T> {
  const res = await fetch(path, { headers: { accept: 'application/json' }, credentials: 'same-origin', cache: 'no-store' });
  if (res.status === 401) throw new Unauthorized('admin token required');
  const body = (await res.json().catch(() => ({}))) as T & { error?: string };
  if (!res.ok) throw new Error(body.error ?? `${path}: HTTP ${res.status}`);
  return body;
}

/** True when signed in; otherwise why not (a wrong token, or too many wrong ones: wait). */
export async function login(token: string): Promise<true | string> {
  const res = await fetch('/api/session', {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    credentials: 'same-origin',
    body: JSON.stringify({ token }),
  });
  if (res.ok) return true;
  if (res.status === 429) return `Too many refused tokens from this address: try again in ${res.headers.get('retry-after') ?? 'a few'} seconds.`;
  return 'That token was refused.';
}

export async function logout(): Promise<void> {
  await fetch('/api/session', { method: 'DELETE', credentials: 'same-origin' });
}

export interface Session {
  token_required: boolean;
  authenticated: boolean;
}

export type Checks = Record<string, boolean | string | number>;

export interface Overview {
  env: string;
  now: string;
  processes: number;
  ready: boolean;
  checks: Checks;
  rate_window_seconds: number;
  requests_per_second: number;
  events_per_second: { accepted: number; rejected: number };
  latency_ms: { window_seconds: number; p50: number | null; p99: number | null };
  queue_append_ms: { window_seconds: number; p50: number | null; p99: number | null };
  status_codes: { last_5_minutes: Record<string, number>; last_hour: Record<string, number> };
  last_hour: {
    requests: number;
    events_accepted: number;
    events_rejected: number;
    rejected_by_reason: Record<string, number>;
    rate_limited: Record<string, number>;
  };
  consumer_lag: { records: number; seconds: number } | null;
  storage: { free_bytes: number; total_bytes: number; low_space_percent: number; low: boolean; stores: Record<string, number> } | null;
  live_since: string;
  serving_processes: { reporting: number; with_traffic_last_hour: number };
}

export interface TimeSeries {
  window_seconds: number;
  step_seconds: number;
  t: number[];
  series: Record<
    | 'requests_2xx' | 'requests_4xx' | 'requests_429' | 'requests_5xx' | 'events_accepted' | 'events_rejected'
    | 'latency_p50_ms' | 'latency_p99_ms' | 'queue_append_p50_ms' | 'queue_append_p99_ms',
    (number | null)[]
  >;
}

export interface KeyView {
  key_id: string;
  created_at: string;
  rotated_at: string | null;
  revoked_at: string | null;
  previous_secret_valid_until: string | null;
  status: 'active' | 'revoked';
}

export interface DataSetRow {
  id: string;
  created_at: string;
  policy: { consent: string; ip: string; pii_scan: string; max_age_seconds: number; merge_window_ms: number; merge_window_seconds: number; view_retention_ms: number; version: number };
  limits: { rps: number; burst_rps: number; burst_seconds: number; eps: number };
  keys: KeyView[];
  grants: string[];
  today: {
    since: string;
    events_accepted: number;
    events_rejected: number;
    acceptance_rate: number | null;
    distinct_events: number;
    match_quality: number | null;
    measurement_only_share: number | null;
  };
  last_hour: { accepted: number; rejected: number; rate_limited: number };
}

export interface Rejection {
  at: number;
  request_id: string;
  index: number;
  event_id: string | null;
  error: string;
}

export interface DataSetDetail extends DataSetRow {
  env: string;
  storage: { records: number; event_bytes: number } | null;
  hours: { hour: string; events: number; by_event_type: Record<string, number>; accepted: number; rejected: number; rejections: Record<string, number> }[];
  last_24h: {
    since: string;
    events: number;
    by_event_type: Record<string, number>;
    accepted: number;
    rejected: number;
    rejections: Record<string, number>;
    identifier_coverage: Record<string, number>;
    match_quality: number | null;
    match_quality_by_event_type: Record<string, { events: number; score: number; coverage: Record<string, number> }>;
    measurement_only_share: number;
  };
  live: {
    step_seconds: number;
    t: number[];
    /** Per minute; null for minutes before the service started. */
    accepted: (number | null)[];
    rejected: (number | null)[];
    rejected_by_reason: Record<string, (number | null)[]>;
    rate_limited: (number | null)[];
    measurement_only: (number | null)[];
    last_hour: { accepted: number; rejected: number; reasons: Record<string, number>; rate_limited: number; measurement_only: number };
    rate_limited_since_start: number;
    recent_rejections: Rejection[];
    consent: { accepted: number; measurement_only: number; measurement_only_share: number | null };
  };
}

export interface EventOutcome {
  at: number;
  data_set_id: string;
  key_id: string;
  request_id: string;
  index: number;
  event_id: string | null;
  event_type: string | null;
  outcome: 'accepted' | 'rejected';
  error?: string;
  /** Masked for display (accepted: as queued; rejected: as received). */
  event?: unknown;
  event_omitted?: string;
}

/** A request refused as a whole (no per-event outcome): live/request-failure.ts. */
export interface RequestFailure {
  at: number;
  request_id: string;
  outcome: 'failed';
  authenticated: boolean;
  status: number;
  error: string;
  error_code: string | null;
  key_id: string | null;
  data_set_id: string | null;
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: unknown;
  body_omitted?: string;
  index: null;
  event_id: null;
  event_type: null;
}

export type TestEvent = EventOutcome | RequestFailure;

export interface TestEvents {
  env: string;
  available: boolean;
  reason?: string;
  events: TestEvent[];
}
