/**
 * The operator console on the admin port (issue 10): the static page (bundled at build time into
 * dist/console, served from memory) and the JSON API it reads. Every figure on the page comes from
 * these routes:
 *
 *   GET  /api/overview                    live rates, status codes, p50/p99 latency, queue append, consumer lag, readiness
 *   GET  /api/timeseries?window=1h&step=10s   the last hour's series (rates per second, percentiles in ms)
 *   GET  /api/data-sets                   data sets: keys (never secrets), grants, limits, policy, today's figures
 *   GET  /api/data-sets/:id               one data set: the above, 24 hourly points, live per-minute series, recent rejections
 *   GET  /api/test-events?outcome=&event_type=&since=&limit=
 *                                         the test environment's last events with their outcome, and the
 *                                         requests refused as a whole (outcome `failed`); production: none, with the reason
 *   DELETE /api/test-events               empties that list (for a CI run: reset, send, assert)
 *   GET|POST|DELETE /api/session          the console's login with the admin token (session cookie)
 *
 * Access: the admin app's onRequest hook (admin-app.ts) guards every route but the static shell
 * and /api/session (`config.public`), which carry no data. With an admin token configured, a
 * request passes with `Authorization: Bearer <token>` or with the session cookie set here.
 */
import { randomBytes, createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteGenericInterface } from 'fastify';
import type { DataSetRecord, KeyRecord } from '../control/control-plane.js';
import type { ConsumerLag } from '../model/consumer-lag.js';
import { isoOrNull, parseDurationMs } from '../control/duration.js';
import type { StatsDocument } from '../analytics/stats-document.js';
import { LIVE_WINDOW_MS, type LiveStore, type TestEventEntry } from '../live/live-stats.js';
import type { AdminAuthGate } from './admin-guard.js';
import type { DiskMonitor } from '../lifecycle/disk-usage.js';

export interface ConsoleDeps {
  readonly env: string;
  readonly live: LiveStore;
  /**
   * Brings the console's entries (a data set's recent rejections, the test environment's list) up
   * to the deletion requests recorded so far (live/console-deletions.ts), before they are read, so
   * that they never show what one covers; waits a bounded time and never rejects.
   */
  readonly syncDeletions?: () => Promise<void>;
  readonly stats: (dataSetId: string, sinceMs: number) => Promise<StatsDocument>;
  readonly lag: () => Promise<ConsumerLag>;
  readonly listDataSets: () => Promise<DataSetRecord[]>;
  readonly listKeys: () => Promise<KeyRecord[]>;
  /** Serving processes of the node (the primary's workers, or 1). */
  readonly processes: () => number;
  /** Disk usage (lifecycle/disk-usage.ts): free space, bytes per store, a data set's view records. */
  readonly disk?: Pick<DiskMonitor, 'usage' | 'dataSet'>;
  /** The other environment of this data dir: its admin port (the real one while it runs, else its default). */
  readonly otherEnvironment?: () => { env: string; running: boolean; admin_port: number; admin_host: string | null };
  /** Where the built console lives (default: dist/console next to dist/src). */
  readonly assetsDir?: string;
}

export interface ConsoleAccess {
  /** The admin app's token check and failed-authentication throttle (admin-app.ts, admin-guard.ts). */
  readonly gate: AdminAuthGate;
  readonly sessions: AdminSessions;
  readonly readiness: () => { ready: boolean; checks: Record<string, boolean | string | number> };
}

// ---------------------------------------------------------------------------------------------
// Sessions

export const SESSION_COOKIE = 'ecapi_admin';
const SESSION_TTL_MS = 12 * 3_600_000;
const MAX_SESSIONS = 1000;

/** Opaque random session ids → expiry, in memory (a restart logs everyone out). Never the token. */
export class AdminSessions {
  readonly #expiry = new Map<string, number>();

  create(nowMs = Date.now()): { id: string; maxAgeSeconds: number } {
    for (const [id, until] of this.#expiry) if (until <= nowMs) this.#expiry.delete(id);
    // Oldest first (insertion order): drop the oldest beyond the cap.
    while (this.#expiry.size >= MAX_SESSIONS) this.#expiry.delete(this.#expiry.keys().next().value!);
    const id = randomBytes(32).toString('base64url');
    this.#expiry.set(id, nowMs + SESSION_TTL_MS);
    return { id, maxAgeSeconds: SESSION_TTL_MS / 1000 };
  }

  valid(id: string | undefined, nowMs = Date.now()): boolean {
    if (!id) return false;
    const until = this.#expiry.get(id);
    if (until === undefined) return false;
    if (until <= nowMs) {
      this.#expiry.delete(id);
      return false;
    }
    return true;
  }

  delete(id: string | undefined): void {
    if (id) this.#expiry.delete(id);
  }
}

export function sessionCookieOf(request: FastifyRequest): string | undefined {
  const header = request.headers.cookie;
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const at = part.indexOf('=');
    if (at > 0 && part.slice(0, at).trim() === SESSION_COOKIE) return part.slice(at + 1).trim();
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// Static files

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.map': 'application/json; charset=utf-8',
};

// No CDN, no inline script: everything comes from this port. uPlot positions its elements with style attributes.
const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; font-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
};

interface Asset {
  readonly body: Buffer;
  readonly type: string;
  readonly etag: string;
}

function loadAssets(dir: string): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  const walk = (sub: string) => {
    for (const name of readdirSync(join(dir, sub))) {
      const rel = sub ? `${sub}/${name}` : name;
      if (statSync(join(dir, rel)).isDirectory()) walk(rel);
      else {
        const body = readFileSync(join(dir, rel));
        const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
        assets.set(rel, { body, type: CONTENT_TYPES[extname(name)] ?? 'application/octet-stream', etag });
      }
    }
  };
  try {
    walk('');
  } catch {
    // Not built: the routes answer 503 with how to build it.
  }
  return assets;
}

// ---------------------------------------------------------------------------------------------
// Figures

const DAY_MS = 86_400_000;
const ratio = (part: number, whole: number) => (whole === 0 ? null : Math.round((part / whole) * 10_000) / 10_000);

function keyView(key: KeyRecord, nowMs: number) {
  return {
    key_id: key.keyId,
    // isoOrNull never throws: rows written before the grace bound (control-plane.ts) may hold a
    // time past the last representable date; they are shown, not answered with a 500.
    created_at: isoOrNull(key.createdAt),
    rotated_at: isoOrNull(key.rotatedAt),
    revoked_at: isoOrNull(key.revokedAt),
    previous_secret_valid_until:
      key.previousSecretValidUntil === null || key.previousSecretValidUntil < nowMs ? null : isoOrNull(key.previousSecretValidUntil),
    status: key.revokedAt !== null ? 'revoked' : 'active',
    data_sets: [...key.dataSets],
  };
}

function todayOf(doc: StatsDocument) {
  const t = doc.totals;
  const seen = t.ingest.accepted + t.ingest.rejected;
  return {
    since: doc.since,
    events_accepted: t.ingest.accepted,
    events_rejected: t.ingest.rejected,
    acceptance_rate: ratio(t.ingest.accepted, seen),
    distinct_events: t.events,
    match_quality: t.events === 0 ? null : t.match_quality_score,
    measurement_only_share: t.events === 0 ? null : t.measurement_only_share,
  };
}

function parseWindow(text: string | undefined, fallback: string): number {
  return parseDurationMs(text ?? fallback);
}

// ---------------------------------------------------------------------------------------------
// Routes: registerConsole lists them; each handler is built by the function of its name below.

type Handler<Route extends RouteGenericInterface = RouteGenericInterface> = (request: FastifyRequest<Route>, reply: FastifyReply) => Promise<unknown>;
type TestEventQuery = { limit?: string; outcome?: string; event_type?: string; since?: string };

export function registerConsole(app: FastifyInstance, deps: ConsoleDeps, access: ConsoleAccess): void {
  const assets = loadAssets(deps.assetsDir ?? fileURLToPath(new URL('../../console/', import.meta.url)));
  // The static shell and the session carry no data: the admin guard lets them through (admin-app.ts).
  const publicRoute = { config: { public: true } };

  app.get('/', publicRoute, redirectToConsole);
  app.get('/console', publicRoute, redirectToConsole);
  app.get('/console/', publicRoute, consoleIndex(assets));
  app.get<{ Params: { '*': string } }>('/console/*', publicRoute, consoleFile(assets));

  app.get('/api/session', publicRoute, sessionState(access));
  app.post<{ Body: { token?: unknown } }>('/api/session', publicRoute, login(access));
  app.delete('/api/session', publicRoute, logout(access));

  app.get('/api/overview', overview(deps, access));
  app.get<{ Querystring: { window?: string; step?: string } }>('/api/timeseries', timeseries(deps));
  app.get('/api/data-sets', dataSetList(deps));
  app.get<{ Params: { id: string } }>('/api/data-sets/:id', dataSetDetail(deps));

  app.get<{ Querystring: TestEventQuery }>('/api/test-events', testEventList(deps));
  app.delete('/api/test-events', testEventReset(deps));
}

// --- the static shell --------------------------------------------------------------------------

async function redirectToConsole(_request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  return reply.redirect('/console/');
}

function sendAsset(assets: Map<string, Asset>, request: FastifyRequest, reply: FastifyReply, name: string): FastifyReply {
  const asset = assets.get(name);
  if (!asset) {
    if (assets.size === 0) {
      return reply.code(503).type('text/plain; charset=utf-8').send('the console is not built: run `npm run build:console -w packages/server`\n');
    }
    return reply.code(404).send({ error: 'not found' });
  }
  reply.headers(SECURITY_HEADERS);
  // Revalidate every time (the files are small and change with each build); 304 when unchanged.
  reply.header('cache-control', 'no-cache').header('etag', asset.etag);
  if (request.headers['if-none-match'] === asset.etag) return reply.code(304).send();
  return reply.type(asset.type).send(asset.body);
}

function consoleIndex(assets: Map<string, Asset>): Handler {
  return async (request, reply) => sendAsset(assets, request, reply, 'index.html');
}

function consoleFile(assets: Map<string, Asset>): Handler<{ Params: { '*': string } }> {
  return async (request, reply) => {
    const name = request.params['*'];
    if (name.includes('..')) return reply.code(404).send({ error: 'not found' });
    return sendAsset(assets, request, reply, name);
  };
}

// --- session -------------------------------------------------------------------------------------

const sessionCookie = (value: string, maxAge: number) => `${SESSION_COOKIE}=${value}; HttpOnly; Secure; SameSite=Strict; Path=/; Max-Age=${maxAge}`;

/** GET /api/session only reports the session cookie: it never compares a token (the login does). */
function sessionState(access: ConsoleAccess): Handler {
  return async (request) => ({
    token_required: access.gate.tokenRequired,
    authenticated: !access.gate.tokenRequired || access.sessions.valid(sessionCookieOf(request)),
  });
}

function login(access: ConsoleAccess): Handler<{ Body: { token?: unknown } }> {
  return async (request, reply) => {
    if (!access.gate.tokenRequired) return { token_required: false, authenticated: true };
    const token = request.body && typeof request.body === 'object' ? request.body.token : undefined;
    // Throttled clients are refused before their token is looked at, unless they gave the correct one recently (admin-guard.ts).
    if (await access.gate.refuseIfThrottled(request, reply, typeof token === 'string' ? token : undefined)) return reply;
    if (typeof token !== 'string' || !access.gate.checkToken(request, token)) {
      return reply.code(401).send({ error: 'admin token required: send Authorization: Bearer <admin token>' });
    }
    const session = access.sessions.create();
    reply.header('set-cookie', sessionCookie(session.id, session.maxAgeSeconds));
    return { token_required: true, authenticated: true, expires_in_seconds: session.maxAgeSeconds };
  };
}

function logout(access: ConsoleAccess): Handler {
  return async (request, reply) => {
    access.sessions.delete(sessionCookieOf(request));
    reply.header('set-cookie', sessionCookie('', 0));
    return { authenticated: false };
  };
}

// --- figures -------------------------------------------------------------------------------------

function overview(deps: ConsoleDeps, access: ConsoleAccess): Handler {
  return async () => {
    const readiness = access.readiness();
    const lag = await deps.lag().catch(() => null);
    return {
      env: deps.env,
      now: new Date().toISOString(),
      processes: deps.processes(),
      ready: readiness.ready,
      checks: readiness.checks,
      ...deps.live.overview(),
      consumer_lag: lag ? { records: lag.lag_records, seconds: lag.lag_seconds } : null,
      storage: (await deps.disk?.usage().catch(() => null)) ?? null,
    };
  };
}

function timeseries(deps: ConsoleDeps): Handler<{ Querystring: { window?: string; step?: string } }> {
  return async (request, reply) => {
    let windowMs: number;
    let stepMs: number;
    try {
      windowMs = parseWindow(request.query.window, '1h');
      stepMs = parseWindow(request.query.step, '10s');
    } catch (error) {
      return reply.code(400).send({ error: (error as Error).message });
    }
    if (windowMs > LIVE_WINDOW_MS || windowMs < 1000) return reply.code(400).send({ error: 'window must be between 1s and 1h' });
    if (stepMs < 1000 || stepMs % 1000 !== 0 || stepMs > windowMs) return reply.code(400).send({ error: 'step must be whole seconds, at most the window' });
    return { env: deps.env, ...deps.live.timeseries(windowMs, stepMs) };
  };
}

/** One data set as the list and the detail page show it: keys (never secrets), grants, limits, policy, today, the last hour. */
async function dataSetRow(deps: ConsoleDeps, ds: DataSetRecord, keys: readonly KeyRecord[], nowMs: number) {
  const own = keys.filter((k) => k.dataSets.includes(ds.id));
  const live = deps.live.dataSet(ds.id, nowMs).last_hour;
  return {
    id: ds.id,
    created_at: isoOrNull(ds.createdAt),
    policy: {
      consent: ds.policy.consent,
      ip: ds.policy.ip,
      pii_scan: ds.policy.piiScan,
      max_age_seconds: ds.policy.maxAgeSeconds,
      // Exact in milliseconds; the seconds figure is kept for older readers (fractional below 1 s).
      merge_window_ms: ds.policy.mergeWindowMs,
      merge_window_seconds: ds.policy.mergeWindowMs / 1000,
      view_retention_ms: ds.policy.viewRetentionMs,
      version: ds.policy.version,
    },
    limits: { rps: ds.limits.rps, burst_rps: ds.limits.burstRps, burst_seconds: ds.limits.burstSeconds, eps: ds.limits.eps },
    keys: own.map((k) => keyView(k, nowMs)),
    grants: own.filter((k) => k.revokedAt === null).map((k) => k.keyId),
    today: todayOf(await deps.stats(ds.id, Math.floor(nowMs / DAY_MS) * DAY_MS)),
    last_hour: { accepted: live.accepted, rejected: live.rejected, rate_limited: live.rate_limited },
  };
}

/** Today's figures of every data set are read from the stats files; several open consoles share one read (1 s). */
function dataSetList(deps: ConsoleDeps): Handler {
  let listCache: { at: number; value: Promise<unknown> } | null = null;
  const rows = async (nowMs: number) => {
    const [dataSets, keys] = await Promise.all([deps.listDataSets(), deps.listKeys()]);
    return Promise.all(dataSets.map((ds) => dataSetRow(deps, ds, keys, nowMs)));
  };
  return async () => {
    const now = Date.now();
    if (!listCache || now - listCache.at > 1000) listCache = { at: now, value: rows(now) };
    const value = listCache.value;
    value.catch(() => (listCache = null));
    return { env: deps.env, data_sets: await value };
  };
}

/** One data set: its row, 24 hourly points, the live per-minute series and recent rejections. */
function dataSetDetail(deps: ConsoleDeps): Handler<{ Params: { id: string } }> {
  return async (request, reply) => {
    const now = Date.now();
    const [dataSets, keys] = await Promise.all([deps.listDataSets(), deps.listKeys()]);
    const dataSet = dataSets.find((ds) => ds.id === request.params.id);
    if (!dataSet) return reply.code(404).send({ error: `unknown data set ${request.params.id}` });
    const row = await dataSetRow(deps, dataSet, keys, now);
    const day = await deps.stats(row.id, now - 23 * 3_600_000);
    // Bounded and never failing, as for the test events: the recent rejections show no deleted event's id.
    await deps.syncDeletions?.();
    const live = deps.live.dataSet(row.id, now);
    return {
      env: deps.env,
      ...row,
      storage: (await deps.disk?.dataSet(row.id).catch(() => null)) ?? null,
      hours: day.hours.map((h) => ({
        hour: h.hour,
        events: h.events,
        by_event_type: h.by_event_type,
        accepted: h.ingest.accepted,
        rejected: h.ingest.rejected,
        rejections: h.ingest.rejections,
      })),
      last_24h: {
        since: day.since,
        events: day.totals.events,
        by_event_type: day.totals.by_event_type,
        accepted: day.totals.ingest.accepted,
        rejected: day.totals.ingest.rejected,
        rejections: day.totals.ingest.rejections,
        identifier_coverage: day.totals.identifier_coverage,
        match_quality: day.totals.events === 0 ? null : day.totals.match_quality_score,
        match_quality_by_event_type: day.totals.match_quality,
        measurement_only_share: day.totals.measurement_only_share,
      },
      live: {
        ...live,
        consent: {
          accepted: live.last_hour.accepted,
          measurement_only: live.last_hour.measurement_only,
          measurement_only_share: ratio(live.last_hour.measurement_only, live.last_hour.accepted),
        },
      },
    };
  };
}

// --- test events ---------------------------------------------------------------------------------

/** The production console's answer: no event contents, and where the test environment's console is. */
function notTestEnvironment(deps: ConsoleDeps) {
  const other = deps.otherEnvironment?.();
  const where = other === undefined
    ? 'serve --env test'
    : other.running
      ? `running, admin port ${other.admin_port}: http://${other.admin_host === '0.0.0.0' || other.admin_host === '::' || !other.admin_host ? '127.0.0.1' : other.admin_host}:${other.admin_port}/console/`
      : `serve --env test; its admin port will be ${other.admin_port} unless --admin-port says otherwise`;
  return {
    env: deps.env,
    available: false,
    reason: `the production console never shows event contents: open the console of the test environment (${where})`,
  };
}

function testEventList(deps: ConsoleDeps): Handler<{ Querystring: TestEventQuery }> {
  return async (request, reply) => {
    const filter = parseTestEventFilter(request.query);
    if (typeof filter === 'string') return reply.code(400).send({ error: filter });
    if (deps.env !== 'test') return { ...notTestEnvironment(deps), events: [] };
    // Bounded and never failing (a store that cannot be read is retried every second, and logged there).
    await deps.syncDeletions?.();
    return { env: deps.env, available: true, events: deps.live.testEvents(filter) };
  };
}

function testEventReset(deps: ConsoleDeps): Handler {
  return async () => {
    if (deps.env !== 'test') return { ...notTestEnvironment(deps), removed: 0 };
    return { env: deps.env, available: true, removed: deps.live.resetTestEvents() };
  };
}

const OUTCOMES: ReadonlySet<string> = new Set(['accepted', 'rejected', 'failed']);
/** At most what the store keeps (test events and unauthenticated failures). */
export const MAX_TEST_EVENTS_LISTED = 250;

/** The query of GET /api/test-events, or the 400's message. */
function parseTestEventFilter(query: TestEventQuery) {
  let limit = MAX_TEST_EVENTS_LISTED;
  if (query.limit !== undefined) {
    const n = Number(query.limit);
    if (!Number.isInteger(n) || n < 1 || n > MAX_TEST_EVENTS_LISTED) return `limit must be an integer from 1 to ${MAX_TEST_EVENTS_LISTED}`;
    limit = n;
  }
  let outcomes: Set<TestEventEntry['outcome']> | undefined;
  if (query.outcome !== undefined && query.outcome !== '' && query.outcome !== 'all') {
    const names = query.outcome.split(',').map((o) => o.trim());
    const wrong = names.find((o) => !OUTCOMES.has(o));
    if (wrong !== undefined) return `unknown outcome "${wrong.slice(0, 40)}": use accepted, rejected or failed (comma-separated), or all`;
    outcomes = new Set(names as TestEventEntry['outcome'][]);
  }
  let sinceMs: number | undefined;
  if (query.since !== undefined && query.since !== '') {
    // An ISO 8601 time, or milliseconds since the epoch (an entry's `at`).
    sinceMs = /^\d+$/.test(query.since) ? Number(query.since) : Date.parse(query.since);
    if (!Number.isFinite(sinceMs)) return 'since must be an ISO 8601 time or milliseconds since the epoch';
  }
  // Absent filters are undefined: LiveStore.testEvents skips them.
  return { limit, outcomes, eventType: query.event_type === '' ? undefined : query.event_type, sinceMs };
}
