/**
 * The admin port (Fastify): health, readiness, Prometheus metrics and analytics (`/api/stats/:dataSetId`).
 * Loopback by default. Bound anywhere else, every route requires the admin token
 * (`Authorization: Bearer <ECAPI_ADMIN_TOKEN>`), compared in constant time; the service refuses to
 * start on a non-loopback admin address without one, and with a weak one anywhere.
 *
 * Before any route, in this order (admin-guard.ts says why): the Host check (421 for a name that
 * is not ours: DNS rebinding), then, with a token, a valid console session cookie, the
 * failed-authentication throttle (429) and the token itself (401).
 */
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { parseSince } from '../analytics/stats-reader.js';
import { AdminHostCheck, AdminAuthThrottle, tokenMatches, type AdminAuthGate } from './admin-guard.js';
import { AdminSessions, registerConsole, sessionCookieOf, type ConsoleDeps } from './console-api.js';

export interface AdminAppConfig {
  /** Required when the admin port is reachable from other hosts. */
  readonly adminToken?: string | undefined;
  /** The address the admin port binds (a name there is an accepted Host). Default 127.0.0.1. */
  readonly adminHost?: string | undefined;
  /** More accepted Host names (`name` or `name:port`): a proxy's or a DNS name in front of the port. */
  readonly allowedHosts?: readonly string[] | undefined;
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
  /** Analytics of a data set from `sinceMs` on (GET /api/stats/:dataSetId), null for an unknown data set (404); absent: 404. */
  readonly stats?: (dataSetId: string, sinceMs: number) => Promise<unknown>;
  /** The operator console (page + /api/overview, /api/data-sets, …; console-api.ts); absent: not served. */
  readonly console?: ConsoleDeps;
}

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

  // 1. Host (DNS rebinding), for every request, whatever its path: before routing decides anything.
  const hosts = new AdminHostCheck(config.adminHost ?? '127.0.0.1', config.allowedHosts ?? []);
  app.addHook('onRequest', async (request, reply) => {
    if (hosts.allows(request.headers.host)) return;
    await reply
      .code(421)
      .header('connection', 'close')
      .send({ error: 'misdirected request: this admin port does not answer for that Host (see --admin-allowed-hosts)' });
  });

  const sessions = new AdminSessions();
  const throttle = new AdminAuthThrottle();
  app.addHook('onClose', async () => throttle.close());
  const expected = config.adminToken;
  const gate: AdminAuthGate = {
    tokenRequired: Boolean(expected),
    async refuseIfThrottled(request, reply, sent) {
      const address = request.socket.remoteAddress;
      const wait = throttle.retryAfterSeconds(address);
      if (wait === 0) return false;
      // Throttled, but the correct token came from this client recently: compare (admin-guard.ts).
      if (expected && sent !== undefined && throttle.recentlyVerified(address)) {
        if (tokenMatches(sent, expected)) return false;
        throttle.recordFailure(address);
      }
      await reply
        .code(429)
        .header('retry-after', String(wait))
        .send({ error: 'too many failed admin authentications from this address: retry after the Retry-After seconds' });
      return true;
    },
    checkToken(request, sent) {
      if (!expected) return true;
      if (tokenMatches(sent, expected)) {
        throttle.recordVerified(request.socket.remoteAddress);
        return true;
      }
      throttle.recordFailure(request.socket.remoteAddress);
      return false;
    },
  };

  // 2. With a token: the throttle, then the token (or the console's session cookie).
  if (expected) {
    app.addHook('onRequest', async (request, reply) => {
      // The console's static shell and its login route carry no data (console-api.ts marks them public).
      if ((request.routeOptions.config as { public?: boolean } | undefined)?.public) return;
      // The console's session cookie (set by POST /api/session after the correct token was given):
      // 32 random bytes, proof the guesser cannot produce, so it is honoured even while throttled.
      if (sessions.valid(sessionCookieOf(request))) return;
      const match = /^Bearer (.+)$/.exec(request.headers.authorization ?? '');
      if (await gate.refuseIfThrottled(request, reply, match?.[1])) return;
      if (match && gate.checkToken(request, match[1]!)) return;
      // RFC 9110 15.5.2: a 401 carries its challenge.
      await reply.code(401).header('www-authenticate', 'Bearer realm="ecapi-ingest admin"').send({ error: 'admin token required: send Authorization: Bearer <admin token>' });
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
    const stats = await deps.stats(request.params.dataSetId, sinceMs);
    if (stats === null) return reply.code(404).send({ error: `data set ${request.params.dataSetId} does not exist` });
    return reply.send(stats);
  });

  if (deps.console) registerConsole(app, deps.console, { gate, sessions, readiness: deps.readiness });

  return app;
}
