/**
 * The public port's request handler: POST /v1/events over TLS 1.3, HTTP/2 and HTTP/1.1 offered
 * through ALPN (the TLS server, its timeouts and connection tracking: public-tls-server.ts).
 *
 * Bare node:http2 (with allowHTTP1), no framework, by measured choice: this is the hot path.
 * buildServer() returns a server that is not listening; the caller listens and closes.
 *
 * Hazards handled here (the threat model and every bound: docs/SECURITY.md):
 * - The request head is judged before any body byte is read or budgeted: no Host (HTTP/1.1) or
 *   :authority (HTTP/2), the gateway, pre-auth shedding, Content-Length over the limit, a body
 *   coding we would not decode, and everything authentication can refuse without the body (Bearer,
 *   missing or malformed headers, unknown or revoked key), with the same answers and in the same
 *   order as after the body. Such an answer ends the exchange (early-answer.ts).
 * - Bodies: the body budget (body-budget.ts) is reserved when the first body bytes arrive, never
 *   for a head alone (a body already whole in memory never waits); connections that have not yet
 *   authenticated a request share a quarter of it. A body must keep arriving (body-sweep.ts: one
 *   sweep, no timer per request). A chunked body is counted as it streams and refused the moment
 *   it passes 1 MiB.
 * - Per request: the closures below and one BodyWatch, nothing more; helpers of other modules are
 *   called only on early answers and once per sweep.
 * - Shutdown: HTTP/2 sessions get GOAWAY and finish their streams; HTTP/1.1 connections end when
 *   idle, busy ones after their response (which then carries Connection: close).
 */
import type { Http2SecureServer, Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { randomUUID } from 'node:crypto';
import { HEADER_KEY_ID, HEADER_REQUEST_ID, MAX_BODY_BYTES } from '@ecapi-ingest/protocol';
import { requestLineWriter, type Logger } from '../observability/logger.js';
import type { ServiceMetrics } from '../observability/service-metrics.js';
import { type RequestError, requestError } from '../errors.js';
import { gatewayAnswer, pathOf } from './gateway.js';
import type { FailedAuthShedder } from '../rate-limit/failed-auth-shedder.js';
import { refusalBeforeBody } from '../auth/request-authenticator.js';
import { BodyBudget, CHUNKED_RESERVATION, type BodyReservation } from './body-budget.js';
import { bodyEncodingRefusal } from './media-types.js';
import { handleEventsRequest, requestErrorOutcome, type EventsOutcome, type EventsRequestDeps } from './events-request.js';
import { clientAddressOf, createPublicTlsServer, type PublicServerConfig } from './public-tls-server.js';
import { DEFAULT_BODY_IDLE_TIMEOUT_MS, DEFAULT_MIN_BODY_BYTES_PER_SECOND, SWEEP_MS, sweepBodies, type BodySweepLimits, type BodyWatch } from './body-sweep.js';
import { closeAfterResponse } from './early-answer.js';

export type { PublicServerConfig } from './public-tls-server.js';

export interface PublicServerDeps extends EventsRequestDeps {
  readonly logger: Logger;
  readonly metrics: ServiceMetrics;
  readonly failedAuth: FailedAuthShedder;
}

/** Bodies declared at least this large are read into one preallocated buffer. */
const PREALLOCATE_FROM = 16 * 1024;
const EMPTY_BODY = Buffer.alloc(0);

type Request = IncomingMessage | Http2ServerRequest;
type Response = ServerResponse | Http2ServerResponse;

export interface PublicServer {
  readonly server: Http2SecureServer;
  /** Stop accepting, let in-flight requests finish, close idle connections; resolves when all are closed. */
  shutdown(graceMs?: number): Promise<void>;
}

function send(res: Response, status: number, body: string, requestId: string, extra?: Record<string, string>): void {
  const headers: Record<string, string | number> = {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    [HEADER_REQUEST_ID]: requestId,
    ...extra,
  };
  (res as ServerResponse).writeHead(status, headers);
  res.end(body);
}

function missingHost(req: Request): boolean {
  const headers = req.headers;
  return headers.host === undefined && ('stream' in req ? headers[':authority'] === undefined : true);
}

export function buildServer(config: PublicServerConfig, deps: PublicServerDeps): PublicServer {
  const requestTimeoutMs = config.requestTimeoutMs ?? 30_000;
  const bodyIdleTimeoutMs = config.bodyIdleTimeoutMs ?? DEFAULT_BODY_IDLE_TIMEOUT_MS;
  const minBodyBytesPerSecond = config.minBodyBytesPerSecond ?? DEFAULT_MIN_BODY_BYTES_PER_SECOND;
  const { server, sockets, active, sessions } = createPublicTlsServer(config);

  const bodyBudget = new BodyBudget(config.bodyBudgetBytes);
  deps.metrics.watchBodyBudget(bodyBudget);
  /** HTTP/1.1 sockets that close after the response being written: later (pipelined) requests are ignored. */
  const closing = new WeakSet<Socket>();
  /** Connections (HTTP/1.1 sockets, HTTP/2 sessions) on which a request passed the HMAC check. */
  const trusted = new WeakSet<object>();
  const watched = new Set<BodyWatch>();
  let clock = performance.now();
  let shuttingDown = false;

  /** Drops requests whose body stalls or crawls (and HTTP/2 streams past the request timeout). */
  const sweepLimits: BodySweepLimits = { requestTimeoutMs, bodyIdleTimeoutMs, minBodyBytesPerSecond };
  const sweep = setInterval(() => {
    clock = performance.now();
    sweepBodies(watched, clock, sweepLimits, deps.logger, deps.failedAuth);
  }, SWEEP_MS);
  sweep.unref();
  server.on('close', () => clearInterval(sweep));

  server.on('session', (session) => {
    if (shuttingDown) session.close();
  });

  const logRequest = requestLineWriter(deps.logger);
  /** Test environment only: a request answered as a whole with an error, for the console (observability/request-failure.ts). */
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
    // HTTP/1.1: say so whenever this connection ends after the response (HTTP/2 forbids the header).
    if (!('stream' in req) && (shuttingDown || closing.has(req.socket))) headers.connection = 'close';
    send(res, outcome.status, body, requestId, headers);
    const latencyMs = performance.now() - started;
    deps.metrics.countRequest(outcome.status);
    deps.metrics.requestDuration.observe(latencyMs / 1000);
    const o = outcome as Partial<EventsOutcome>;
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
    const connection: object | undefined = isH2 ? req.stream.session : socket;
    const peer = isH2 ? req.stream.session?.socket as Socket | undefined : socket;
    // The client's address: the peer's, or the one a trusted proxy's PROXY header gave (connection-front.ts).
    const address = clientAddressOf(peer);
    // The key id the request names (not yet verified): it selects a verified pair's bucket (failed-auth-shedder.ts).
    const namedKeyId = req.headers[HEADER_KEY_ID];
    const keyId = typeof namedKeyId === 'string' ? namedKeyId : undefined;
    const trustedConnection = connection !== undefined && trusted.has(connection);
    if (socket) active.set(socket, (active.get(socket) ?? 0) + 1);

    /** Answers from the request head alone: the body is not read and the exchange ends. */
    const refuse = (error: RequestError, extra?: Record<string, string>): void => {
      closeAfterResponse(req, res, closing);
      finish(req, res, requestId, started, requestErrorOutcome(error), extra);
    };

    if (missingHost(req)) {
      res.on('close', () => exchangeClosed(socket, isH2));
      refuse(requestError('MISSING_HOST'));
      return;
    }

    const gateway = gatewayAnswer(req.method ?? '', pathOf(req.url ?? '/'), req.headers.authorization);
    if (gateway) {
      res.on('close', () => exchangeClosed(socket, isH2));
      const extra = gateway.errorType ? { 'x-amzn-errortype': gateway.errorType } : undefined;
      // The body of a request we don't serve is not read.
      closeAfterResponse(req, res, closing);
      finish(req, res, requestId, started, { status: gateway.status, body: gateway.body, accepted: 0, rejected: 0 }, extra);
      return;
    }

    // A connection on which a request already passed the HMAC is never shed: other clients of its
    // address failing must not stop a sender that proved its secret (issue 29).
    const shedFor = trustedConnection ? 0 : deps.failedAuth.shedSeconds(address, keyId);
    if (shedFor > 0) {
      res.on('close', () => exchangeClosed(socket, isH2));
      deps.metrics.rateLimited.inc({ limit: 'failed_auth' });
      refuse(requestError('RATE_LIMITED', 'too many failed authentication attempts from this address'), { 'retry-after': String(shedFor) });
      return;
    }

    const declared = req.headers['content-length'];
    if (declared !== undefined && Number(declared) > MAX_BODY_BYTES) {
      res.on('close', () => exchangeClosed(socket, isH2));
      refuse(requestError('PAYLOAD_TOO_LARGE'));
      return;
    }
    const encoding = bodyEncodingRefusal(req.headers['content-encoding'], req.headers['transfer-encoding']);
    if (encoding !== null) {
      res.on('close', () => exchangeClosed(socket, isH2));
      refuse(requestError(encoding));
      return;
    }
    const refusal = refusalBeforeBody(req.headers, deps.credentials());
    if (refusal !== null) {
      res.on('close', () => exchangeClosed(socket, isH2));
      if (refusal.status === 401) deps.failedAuth.recordFailure(address, keyId);
      refuse(refusal);
      return;
    }

    // The body. Nothing is reserved until its first bytes arrive (a head alone costs no budget);
    // then, if the budget has no room, the request pauses (its bytes wait in the socket) until it has.
    const declaredBytes = Number(declared);
    const reserved = declared !== undefined && Number.isSafeInteger(declaredBytes) && declaredBytes >= 0 ? declaredBytes : CHUNKED_RESERVATION;
    const watch: BodyWatch = {
      req, requestId, address, keyId, untrusted: !trustedConnection,
      startedAt: clock, lastDataAt: clock, admittedAt: 0, bytes: 0, paused: false, buffered: 0, admitNow: null,
    };
    watched.add(watch);
    let reservation: BodyReservation | null = null;
    let withdraw: (() => void) | null = null;
    /** Chunks that came before the budget admitted the request (normally just the first). */
    let early: Buffer[] | null = null;
    let whole: Buffer | null = null;
    let chunks: Buffer[] | null = null;
    let size = 0;
    let done = false;
    let ended = false;
    let closed = false;

    const stop = (): void => {
      done = true;
      watched.delete(watch);
      req.removeAllListeners('data');
    };
    /** Keeps one chunk of an admitted body; false when the body went over the limit (answered). */
    const take = (chunk: Buffer): boolean => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        stop();
        req.pause();
        refuse(requestError('PAYLOAD_TOO_LARGE'));
        return false;
      }
      if (size > reserved) reservation!.grow(Math.min(chunk.length, size - reserved));
      // A large body with a known length is copied straight into one buffer of its own: the
      // socket's chunks die young instead of living until a final concat (which would hold the
      // body twice), and the buffer can later be transferred to the queue's writer without a copy.
      if (whole && size <= whole.length) {
        chunk.copy(whole, size - chunk.length);
        return true;
      }
      if (whole) {
        // More than Content-Length said (HTTP/1.1's parser never allows it): keep what came as chunks.
        chunks = [whole.subarray(0, size - chunk.length)];
        whole = null;
      }
      if (chunks === null) chunks = [chunk];
      else chunks.push(chunk);
      return true;
    };
    const complete = (): void => {
      if (done) return;
      stop();
      // HTTP/2: a stream reset or a lost connection ends the request too, with a truncated body.
      if (isH2 && req.stream.destroyed) return;
      const body = whole ? whole.subarray(0, size) : chunks === null ? EMPTY_BODY : chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
      handleEventsRequest(deps, req.headers, body, requestId).then(
        (outcome) => {
          // Past the HMAC (the key id is known only then): this connection's sender holds a secret,
          // and so does this (key id, address) pair.
          if (outcome.keyId !== undefined) {
            deps.failedAuth.recordVerified(address, outcome.keyId);
            if (watch.untrusted && connection !== undefined) trusted.add(connection);
          }
          if (outcome.status === 401) deps.failedAuth.recordFailure(address, keyId);
          finish(req, res, requestId, started, outcome, undefined, body);
        },
        (error: unknown) => {
          deps.logger.error({ request_id: requestId, err: { type: (error as Error)?.name, message: (error as Error)?.message } }, 'request failed');
          finish(req, res, requestId, started, requestErrorOutcome(requestError('BACKEND_UNAVAILABLE')));
        },
      );
    };
    const admitted = (granted: BodyReservation): void => {
      reservation = granted;
      if (closed || done) {
        granted.release();
        return;
      }
      const wasPaused = watch.paused;
      watch.paused = false;
      watch.admittedAt = clock;
      watch.lastDataAt = clock;
      if (reserved >= PREALLOCATE_FROM && declared !== undefined) whole = Buffer.allocUnsafeSlow(reserved);
      const first = early!;
      early = null;
      for (const chunk of first) if (!take(chunk)) return;
      if (ended) complete();
      else if (wasPaused) req.resume();
    };

    req.on('data', (chunk: Buffer) => {
      if (done) return;
      watch.bytes += chunk.length;
      watch.lastDataAt = clock;
      if (reservation !== null) {
        take(chunk);
        return;
      }
      if (early !== null) {
        early.push(chunk);
        return;
      }
      early = [chunk];
      // The whole body came with its first read (most single events): nothing left to hold back.
      if (declared !== undefined && chunk.length >= reserved) {
        admitted(bodyBudget.admitNow(reserved, !watch.untrusted));
        return;
      }
      withdraw = bodyBudget.reserve(reserved, admitted, !watch.untrusted);
      if (reservation === null) {
        watch.paused = true;
        watch.buffered = req.readableLength;
        watch.admitNow = () => {
          withdraw?.();
          withdraw = null;
          if (reservation === null) admitted(bodyBudget.admitNow(reserved, !watch.untrusted));
        };
        req.pause();
      }
    });
    req.on('error', () => stop());
    req.on('end', () => {
      if (done) return;
      if (early !== null) ended = true;
      else complete();
    });
    res.on('close', () => {
      closed = true;
      if (!done) {
        done = true;
        watched.delete(watch);
      }
      withdraw?.();
      reservation?.release();
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
