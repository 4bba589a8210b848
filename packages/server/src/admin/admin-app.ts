/**
 * The admin port (Fastify): health, readiness, Prometheus metrics and analytics (`/api/stats/:dataSetId`).
 * Loopback by default. Bound anywhere else, every route requires the admin token
 * (`Authorization: Bearer <ECAPI_ADMIN_TOKEN>`), compared in constant time; the service refuses to
 * start on a non-loopback admin address without one.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { createHash, timingSafeEqual } from 'node:crypto';
import { parseSince } from '../analytics/stats-reader.js';
import { AdminSessions, registerConsole, sessionCookieOf, type ConsoleDeps } from './console-api.js';

export interface AdminAppConfig {
  /** Required when the admin port is reachable from other hosts. */
  readonly adminToken?: string | undefined;
}

export interface MetricsSource {
  readonly contentType: string;
  text(): Promise<string>;
}

export interface AdminAppDeps {
  /** Prometheus exposition: one service's registry, or the aggregate of a node's workers. */
  readonly metrics: MetricsSource;
  /** Whether the service accepts events now, and why not. */
  readonly readiness: () => { ready: boolean; checks: Record<string, boolean | string | number> };
  /** Analytics of a data set from `sinceMs` on (GET /api/stats/:dataSetId); absent: 404. */
  readonly stats?: (dataSetId: string, sinceMs: number) => Promise<unknown>;
  /** The operator console (page + /api/overview, /api/data-sets, …; console-api.ts); absent: not served. */
  readonly console?: ConsoleDeps;
}

const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest();

export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || host === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

export function buildAdminApp(config: AdminAppConfig, deps: AdminAppDeps): FastifyInstance {
  const app = Fastify({
    logger: false,
    requestTimeout: 30_000,
    connectionTimeout: 60_000,
    keepAliveTimeout: 65_000,
  });

  const sessions = new AdminSessions();
  if (config.adminToken) {
    const expected = digest(config.adminToken);
    app.addHook('onRequest', async (request, reply) => {
      // The console's static shell and its login route carry no data (console-api.ts marks them public).
      if ((request.routeOptions.config as { public?: boolean } | undefined)?.public) return;
      const header = request.headers.authorization ?? '';
      const match = /^Bearer (.+)$/.exec(header);
      // Hash both sides: equal lengths for timingSafeEqual whatever was sent.
      if (match && timingSafeEqual(digest(match[1]!), expected)) return;
      // Or the console's session cookie, set by POST /api/session after the token was given once.
      if (sessions.valid(sessionCookieOf(request))) return;
      await reply.code(401).send({ error: 'admin token required: send Authorization: Bearer <admin token>' });
    });
  }

  app.get('/healthz', async () => ({ status: 'ok' }));

  app.get('/readyz', async (_request, reply) => {
    const state = deps.readiness();
    return reply.code(state.ready ? 200 : 503).send(state);
  });

  app.get('/metrics', async (_request, reply) => {
    const text = await deps.metrics.text();
    return reply.type(deps.metrics.contentType).send(text);
  });

  app.get<{ Params: { dataSetId: string }; Querystring: { since?: string } }>('/api/stats/:dataSetId', async (request, reply) => {
    if (!deps.stats) return reply.code(404).send({ error: 'stats are not available on this port' });
    let sinceMs: number;
    try {
      sinceMs = parseSince(request.query.since, Date.now());
    } catch (error) {
      return reply.code(400).send({ error: (error as Error).message });
    }
    return reply.send(await deps.stats(request.params.dataSetId, sinceMs));
  });

  if (deps.console) registerConsole(app, deps.console, { adminToken: config.adminToken, sessions, readiness: deps.readiness });

  return app;
}
