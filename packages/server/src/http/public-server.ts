/**
 * The public port's request handler: POST /v1/events over TLS 1.3, HTTP/2 and HTTP/1.1 offered
 * through ALPN (the TLS server, its timeouts and connection tracking: public-tls-server.ts).
 *
 * Bare node:http2 (with allowHTTP1), no framework, by measured choice: this is the hot path.
 * buildServer() returns a server that is not listening; the caller listens and closes. It only
 * wires the steps of a request together, each in its own module:
 *   head-refusal.ts   the request head judged before any body byte is read or budgeted (Host, the
 *                     gateway, pre-auth shedding, Content-Length, body coding, what authentication
 *                     refuses without the body); such an answer ends the exchange (early-answer.ts);
 *   body-reader.ts    the body, under the body budget (body-budget.ts) and the sweep (body-sweep.ts);
 *   events-request.ts the spec's checks of (headers, body) and the queue;
 * and here: the answer (X-Request-Id, log line, metrics), trust of a connection that passed the
 * HMAC (told to public-tls-server.ts, which owns each connection's state: connectionOf(req) reads
 * it, trust() sets it; it closes untrusted connections at a deadline and drops the oldest one past
 * the connection cap), the count of requests refused on a connection that never authenticated
 * (early-answer.ts countRefusal, in that state: the 3rd ends it), the metrics of these defences
 * (the connection gauges, the closes by reason, HTTP/2 streams refused while too many untrusted
 * bodies wait) and of what the TLS server's hooks and the body sweep report (handshake failures,
 * timeouts and stalled bodies, protocol errors), and shutdown. The client address
 * that shedding counts is keyed by rate-limit/client-key.ts (IPv6 by /64). Log lines of refusals
 * before authentication are aggregated by the log writer (observability/logger.ts). The threat
 * model and every bound: docs/SECURITY.md.
 *
 * Hazards handled here:
 * - Per request: one BodyReader and the closures below, nothing more; helpers of other modules are
 *   called only on early answers and once per sweep. Whether the connection is trusted: one
 *   property read (connectionOf), once per request, whatever the protocol.
 * - Shutdown: HTTP/2 sessions get GOAWAY and finish their streams; HTTP/1.1 connections end when
 *   idle, busy ones after their response (which then carries Connection: close).
 */
import type { Http2SecureServer, Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { randomUUID } from 'node:crypto';
import { HEADER_KEY_ID, HEADER_REQUEST_ID } from '@ecapi-ingest/protocol';
import { requestLineWriter, type Logger } from '../observability/logger.js';
import type { ServiceMetrics } from '../observability/service-metrics.js';
import { requestError } from '../errors.js';
import type { FailedAuthShedder } from '../rate-limit/failed-auth-shedder.js';
import { clientKeyOf } from '../rate-limit/client-key.js';
import { BodyBudget } from './body-budget.js';
import { handleEventsRequest, requestErrorOutcome, type EventsOutcome, type EventsRequestDeps } from './events-request.js';
import { clientAddressOf, connectionOf, createPublicTlsServer, type PublicServerConfig } from './public-tls-server.js';
import { DEFAULT_BODY_IDLE_TIMEOUT_MS, DEFAULT_MIN_BODY_BYTES_PER_SECOND, SWEEP_MS, sweepBodies, type BodyDrop, type BodySweepLimits, type BodyWatch } from './body-sweep.js';
import { closeAfterResponse, countRefusal } from './early-answer.js';
import { headRefusal } from './head-refusal.js';
import { BodyReader, type ReaderHost } from './body-reader.js';

/** The 429 of a request refused because too many unauthenticated bodies wait for room (body-budget.ts). */
const BODY_WAIT_REFUSAL = 'too many request bodies from connections not yet authenticated are waiting; retry after Retry-After seconds';

export type { PublicServerConfig } from './public-tls-server.js';

export interface PublicServerDeps extends EventsRequestDeps {
  readonly logger: Logger;
  readonly metrics: ServiceMetrics;
  readonly failedAuth: FailedAuthShedder;
}

type Request = IncomingMessage | Http2ServerRequest;
type Response = ServerResponse | Http2ServerResponse;

export interface PublicServer {
  readonly server: Http2SecureServer;
  /** Stop accepting, let in-flight requests finish, close idle connections; resolves when all are closed. */
  shutdown(graceMs?: number): Promise<void>;
}

/**
 * A 401's challenge (RFC 9110 15.5.2: a 401 MUST carry one; the spec names none): the scheme is the
 * body's HMAC-SHA256, its parameters the headers that carry it. The same for every 401, so it tells
 * nothing the body does not.
 */
export const WWW_AUTHENTICATE = 'HMAC-SHA256 realm="/v1/events", headers="X-Service-Key-Id X-Service-Data-Set X-Service-Signature"';

function send(res: Response, status: number, body: string, requestId: string, extra?: Record<string, string>): void {
  const headers: Record<string, string | number> = {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    [HEADER_REQUEST_ID]: requestId,
    ...extra,
  };
  if (status === 401) headers['www-authenticate'] = WWW_AUTHENTICATE;
  (res as ServerResponse).writeHead(status, headers);
  res.end(body);
}

export function buildServer(config: PublicServerConfig, deps: PublicServerDeps): PublicServer {
  const requestTimeoutMs = config.requestTimeoutMs ?? 30_000;
  const bodyIdleTimeoutMs = config.bodyIdleTimeoutMs ?? DEFAULT_BODY_IDLE_TIMEOUT_MS;
  const minBodyBytesPerSecond = config.minBodyBytesPerSecond ?? DEFAULT_MIN_BODY_BYTES_PER_SECOND;
  // Trust is the TLS server's: each connection's state (connectionOf), trusted once trust() is told.
  // What the defences and Node's own layers end, counted on their close and error paths (never per request).
  const metrics = deps.metrics;
  const tls = createPublicTlsServer(config, {
    onDefenceClose: (reason) => metrics.countDefenceClose(reason),
    onHandshakeFailure: (reason) => metrics.countHandshakeFailure(reason),
    onTimeout: (timeout) => metrics.countTimeout(timeout),
    onProtocolError: (protocol) => metrics.countProtocolError(protocol),
  });
  const { server, sockets, active, sessions } = tls;
  deps.metrics.watchConnections({ connections: () => sockets.size, untrusted: tls.untrustedConnections });

  const bodyBudget = new BodyBudget(config.bodyBudgetBytes);
  deps.metrics.watchBodyBudget(bodyBudget);
  /** HTTP/1.1 sockets that close after the response being written: later (pipelined) requests are ignored. */
  const closing = new WeakSet<Socket>();
  /** What every BodyReader shares: the budget, the sweep's set and its coarse clock; HTTP/2 refusals counted. */
  const readers: ReaderHost = {
    clock: performance.now(), budget: bodyBudget, watched: new Set<BodyWatch>(),
    onStreamRefused: () => deps.metrics.countStreamRefused('body_wait'),
  };
  let shuttingDown = false;

  /** Drops requests whose body stalls or crawls (and HTTP/2 streams past the request timeout). */
  const sweepLimits: BodySweepLimits = { requestTimeoutMs, bodyIdleTimeoutMs, minBodyBytesPerSecond };
  const countDrop = (reason: BodyDrop): void => metrics.countTimeout(reason);
  const sweep = setInterval(() => {
    readers.clock = performance.now();
    sweepBodies(readers.watched, readers.clock, sweepLimits, deps.logger, deps.failedAuth, countDrop);
  }, SWEEP_MS);
  sweep.unref();
  server.on('close', () => clearInterval(sweep));

  server.on('session', (session) => {
    if (shuttingDown) session.close();
  });

  const logRequest = requestLineWriter(deps.logger);
  /** Test environment only: a request answered as a whole with an error, for the console (live/request-failure.ts). */
  const observeFailure = (req: Request, requestId: string, outcome: Partial<EventsOutcome> & { status: number }, requestBody: Buffer | undefined): void => {
    const snapshot = deps.credentials();
    const authenticated = outcome.keyId !== undefined && outcome.dataSetId !== undefined ? { keyId: outcome.keyId, dataSetId: outcome.dataSetId } : undefined;
    deps.observer!.requestFailed!({
      requestId, receivedAtMs: deps.now(), status: outcome.status, responseBody: outcome.body ?? '', errorCode: outcome.errorCode ?? null,
      method: req.method ?? '', url: req.url ?? '', headers: req.headers,
      ...(authenticated ? { authenticated, ...(requestBody ? { body: requestBody } : {}) } : {}),
      knownKey: (id) => snapshot.keys.has(id), knownDataSet: (id) => snapshot.dataSets.has(id),
    });
  };
  const finish = (req: Request, res: Response, requestId: string, started: number, outcome: EventsOutcome | { status: number }, extraHeaders?: Record<string, string>, requestBody?: Buffer): void => {
    const body = 'body' in outcome ? outcome.body : '';
    const headers = { ...(outcome as EventsOutcome).headers, ...extraHeaders };
    const o = outcome as Partial<EventsOutcome>;
    // Answered without authentication on a connection where nothing authenticated: counted, the last allowed one ends it.
    if (o.keyId === undefined && outcome.status >= 400 && outcome.status < 500) {
      const connection = connectionOf(req);
      if (connection !== undefined && !connection.trusted && countRefusal(req, res, connection, closing)) deps.metrics.countDefenceClose('refusals');
    }
    // HTTP/1.1: say so whenever this connection ends after the response (HTTP/2 forbids the header).
    if (!('stream' in req) && (shuttingDown || closing.has(req.socket))) headers.connection = 'close';
    send(res, outcome.status, body, requestId, headers);
    const latencyMs = performance.now() - started;
    deps.metrics.countRequest(outcome.status);
    deps.metrics.requestDuration.observe(latencyMs / 1000);
    logRequest({
      request_id: requestId,
      status: outcome.status,
      data_set_id: o.dataSetId,
      key_id: o.keyId,
      accepted: o.accepted ?? 0,
      rejected: o.rejected ?? 0,
      error_code: o.errorCode,
      latency_ms: Math.round(latencyMs * 100) / 100,
      http: req.httpVersion,
    });
    // A request-level error (per-event outcomes, rejected > 0, are reported by events-request.ts).
    if (outcome.status >= 400 && (o.rejected ?? 0) === 0 && deps.observer?.wantsEvents && deps.observer.requestFailed) {
      observeFailure(req, requestId, o as Partial<EventsOutcome> & { status: number }, requestBody);
    }
  };

  server.on('request', (req: Request, res: Response) => {
    const isH2 = 'stream' in req;
    // HTTP/1.1 sockets only: HTTP/2's session.socket is a proxy, never the TLS socket of
    // 'secureConnection' (an HTTP/2 session finishes its own streams on close).
    const socket = isH2 ? undefined : req.socket;
    // Pipelined behind a request whose answer closes the connection: never processed, never answered.
    if (socket !== undefined && closing.has(socket)) return;
    const started = performance.now();
    const requestId = randomUUID();
    // This connection's state (public-tls-server.ts): one property read.
    const connection = connectionOf(req);
    const peer = isH2 ? req.stream.session?.socket as Socket | undefined : socket;
    // The client, as shedding counts it: the peer's address, or the one a trusted proxy's PROXY header
    // gave (connection-front.ts); IPv4 as is, IPv6 by its /64 (rate-limit/client-key.ts).
    const address = clientKeyOf(clientAddressOf(peer));
    // The key id the request names (not yet verified): it selects a verified pair's bucket (failed-auth-shedder.ts).
    const namedKeyId = req.headers[HEADER_KEY_ID];
    const keyId = typeof namedKeyId === 'string' ? namedKeyId : undefined;
    const trustedConnection = connection !== undefined && connection.trusted;
    if (socket) active.set(socket, (active.get(socket) ?? 0) + 1);

    const refusal = headRefusal(req, address, keyId, trustedConnection, deps);
    if (refusal !== null) {
      res.on('close', () => exchangeClosed(socket, isH2));
      closeAfterResponse(req, res, closing);
      finish(req, res, requestId, started, refusal.outcome, refusal.headers);
      return;
    }

    // The body (body-reader.ts), then the spec's checks of the request (events-request.ts).
    const reader = new BodyReader(
      req, requestId, address, keyId, !trustedConnection, readers,
      (body) => {
        handleEventsRequest(deps, req.headers, body, requestId).then(
          (outcome) => {
            // Past the HMAC (the key id is known only then): this connection's sender holds a secret,
            // and so does this (key id, address) pair.
            if (outcome.keyId !== undefined) {
              deps.failedAuth.recordVerified(address, outcome.keyId);
              if (!trustedConnection && connection !== undefined) tls.trust(connection);
            }
            if (outcome.status === 401) deps.failedAuth.recordFailure(address, keyId);
            finish(req, res, requestId, started, outcome, undefined, body);
          },
          (error: unknown) => {
            deps.logger.error({ request_id: requestId, err: { type: (error as Error)?.name, message: (error as Error)?.message } }, 'request failed');
            finish(req, res, requestId, started, requestErrorOutcome(requestError('BACKEND_UNAVAILABLE')));
          },
        );
      },
      () => {
        closeAfterResponse(req, res, closing);
        finish(req, res, requestId, started, requestErrorOutcome(requestError('PAYLOAD_TOO_LARGE')));
      },
      // HTTP/1.1: too many bodies of connections not yet authenticated wait already (body-budget.ts
      // caps); HTTP/2 refusals are REFUSED_STREAM resets (body-reader.ts refuse), counted apart
      // (readers.onStreamRefused): they have no status.
      () => {
        closeAfterResponse(req, res, closing);
        deps.metrics.rateLimited.inc({ limit: 'body_wait' });
        finish(req, res, requestId, started, requestErrorOutcome(requestError('RATE_LIMITED', BODY_WAIT_REFUSAL)), { 'retry-after': '1' });
      },
    );
    res.on('close', () => {
      reader.closed();
      exchangeClosed(socket, isH2);
    });
  });

  /** Counts a finished HTTP/1.1 exchange; during shutdown an idle connection then ends. */
  const exchangeClosed = (socket: Socket | undefined, isH2: boolean): void => {
    if (!socket) return;
    const left = (active.get(socket) ?? 1) - 1;
    active.set(socket, left);
    if (shuttingDown && left === 0 && !isH2) socket.end();
  };

  return {
    server,
    shutdown(graceMs = 10_000): Promise<void> {
      shuttingDown = true;
      return new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          for (const socket of sockets) socket.destroy();
        }, graceMs);
        timer.unref();
        server.close(() => {
          clearTimeout(timer);
          resolve();
        });
        // HTTP/2: GOAWAY, open streams finish. HTTP/1.1: idle connections end now, busy ones after
        // their response (which carries Connection: close).
        for (const session of sessions) session.close();
        for (const socket of sockets) {
          if ((socket as TLSSocket).alpnProtocol === 'h2') continue;
          if ((active.get(socket) ?? 0) === 0) socket.end();
        }
      });
    },
  };
}
