/**
 * The public port: POST /v1/events over TLS 1.3, HTTP/2 and HTTP/1.1 offered through ALPN.
 *
 * Bare node:http2 (with allowHTTP1), no framework, by measured choice: this is the hot path.
 * buildServer() returns a server that is not listening; the caller listens and closes.
 *
 * Hazards handled here:
 * - Bodies: a Content-Length over the limit is refused before reading; a chunked body is counted
 *   as it streams and refused the moment it passes 1 MiB, so no more than the limit is buffered.
 *   After such an early answer the connection is closed (HTTP/1.1) or the stream reset with
 *   NO_ERROR (HTTP/2), because the unread remainder of the body can't be trusted to be drained.
 * - Slow clients: headers must arrive within headersTimeoutMs and the whole body within
 *   requestTimeoutMs, else the connection or stream is destroyed; idle keep-alive connections are
 *   closed after keepAliveTimeoutMs.
 * - Plain HTTP or TLS < 1.3 never reaches a handler: the TLS handshake fails first.
 */
import { constants as h2, createSecureServer, type Http2SecureServer, type Http2ServerRequest, type Http2ServerResponse } from 'node:http2';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { randomUUID } from 'node:crypto';
import { HEADER_REQUEST_ID, MAX_BODY_BYTES } from '@ecapi-ingest/protocol';
import type { Logger } from '../observability/logger.js';
import type { ServiceMetrics } from '../observability/service-metrics.js';
import { requestError } from '../errors.js';
import { gatewayAnswer, pathOf } from './gateway.js';
import type { FailedAuthShedder } from '../rate-limit/failed-auth-shedder.js';
import { BodyBudget, CHUNKED_RESERVATION, type BodyReservation } from './body-budget.js';
import { handleEventsRequest, requestErrorOutcome, type EventsOutcome, type EventsRequestDeps } from './events-request.js';

export interface PublicServerConfig {
  readonly cert: string;
  readonly key: string;
  readonly headersTimeoutMs?: number;
  readonly requestTimeoutMs?: number;
  readonly keepAliveTimeoutMs?: number;
  /** Request-body bytes this process holds at once (body-budget.ts); default 16 MiB. */
  readonly bodyBudgetBytes?: number;
}

export interface PublicServerDeps extends EventsRequestDeps {
  readonly logger: Logger;
  readonly metrics: ServiceMetrics;
  readonly failedAuth: FailedAuthShedder;
}

/** Bodies declared at least this large are read into one preallocated buffer. */
const PREALLOCATE_FROM = 16 * 1024;

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

/** Ends the exchange without reading the rest of the request body. */
function closeAfterResponse(req: Request, res: Response): void {
  if ('stream' in req) {
    const stream = req.stream;
    res.on('finish', () => {
      if (!stream.destroyed) stream.close(h2.NGHTTP2_NO_ERROR);
    });
    return;
  }
  const socket = req.socket;
  res.on('finish', () => {
    // Half-close, then give the peer a moment to read our answer before the socket goes away.
    socket.end();
    setTimeout(() => socket.destroy(), 1000).unref();
  });
}

export function buildServer(config: PublicServerConfig, deps: PublicServerDeps): PublicServer {
  const headersTimeoutMs = config.headersTimeoutMs ?? 10_000;
  const requestTimeoutMs = config.requestTimeoutMs ?? 30_000;
  const keepAliveTimeoutMs = config.keepAliveTimeoutMs ?? 65_000;

  const server = createSecureServer({
    cert: config.cert,
    key: config.key,
    allowHTTP1: true,
    minVersion: 'TLSv1.3',
    maxVersion: 'TLSv1.3',
    ALPNProtocols: ['h2', 'http/1.1'],
    settings: { maxConcurrentStreams: 256 },
  });
  // HTTP/1.1 side (allowHTTP1 routes those connections through node:http's machinery).
  const http1 = server as unknown as {
    headersTimeout: number;
    requestTimeout: number;
    keepAliveTimeout: number;
    connectionsCheckingInterval: number;
  };
  // Node enforces the HTTP/1.1 headers timeout only when it sweeps its connection list, every
  // 30 s by default: a header trickle would live 30 s instead of headersTimeoutMs. Sweep every second.
  http1.connectionsCheckingInterval = Math.min(1000, headersTimeoutMs);
  http1.headersTimeout = headersTimeoutMs;
  http1.requestTimeout = requestTimeoutMs;
  http1.keepAliveTimeout = keepAliveTimeoutMs;
  // Idle TLS connections (including HTTP/2 sessions without streams) are closed after this.
  server.setTimeout(keepAliveTimeoutMs);
  // A TLS client that connects and never completes the handshake is dropped.
  (server as unknown as { handshakeTimeout?: number }).handshakeTimeout = headersTimeoutMs;

  const bodyBudget = new BodyBudget(config.bodyBudgetBytes);
  deps.metrics.watchBodyBudget(bodyBudget);
  const sockets = new Set<Socket>();
  const active = new Map<Socket, number>();
  let shuttingDown = false;
  server.on('secureConnection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => {
      sockets.delete(socket);
      active.delete(socket);
    });
  });
  server.on('tlsClientError', () => {
    // Handshake failures (plain HTTP, TLS 1.2 clients, scanners): nothing to answer, nothing to log per event.
  });
  const sessions = new Set<import('node:http2').ServerHttp2Session>();
  server.on('session', (session) => {
    if (shuttingDown) session.close();
    sessions.add(session);
    session.on('close', () => sessions.delete(session));
  });

  const finish = (req: Request, res: Response, requestId: string, started: number, outcome: EventsOutcome | { status: number }, extraHeaders?: Record<string, string>): void => {
    const body = 'body' in outcome ? outcome.body : '';
    const headers = { ...(outcome as EventsOutcome).headers, ...extraHeaders };
    if (shuttingDown && !('stream' in req)) headers.connection = 'close';
    send(res, outcome.status, body, requestId, headers);
    const latencyMs = performance.now() - started;
    deps.metrics.countRequest(outcome.status);
    deps.metrics.requestDuration.observe(latencyMs / 1000);
    const o = outcome as Partial<EventsOutcome>;
    deps.logger.info(
      {
        request_id: requestId,
        status: outcome.status,
        data_set_id: o.dataSetId,
        key_id: o.keyId,
        accepted: o.accepted ?? 0,
        rejected: o.rejected ?? 0,
        error_code: o.errorCode,
        latency_ms: Math.round(latencyMs * 100) / 100,
        http: req.httpVersion,
      },
      'request',
    );
  };

  server.on('request', (req: Request, res: Response) => {
    const started = performance.now();
    const requestId = randomUUID();
    // HTTP/2's session.socket is a proxy, never the TLS socket of 'secureConnection': only HTTP/1.1
    // exchanges are counted per socket (an HTTP/2 session finishes its own streams on close).
    const peer = 'stream' in req ? req.stream.session?.socket as Socket | undefined : req.socket;
    const socket = 'stream' in req ? undefined : req.socket;
    if (socket) active.set(socket, (active.get(socket) ?? 0) + 1);
    res.on('close', () => {
      if (!socket) return;
      const left = (active.get(socket) ?? 1) - 1;
      active.set(socket, left);
      if (shuttingDown && left === 0 && !('stream' in req)) socket.end();
    });

    const gateway = gatewayAnswer(req.method ?? '', pathOf(req.url ?? '/'), req.headers.authorization);
    if (gateway) {
      const extra = gateway.errorType ? { 'x-amzn-errortype': gateway.errorType } : undefined;
      finish(req, res, requestId, started, { status: gateway.status, body: gateway.body, accepted: 0, rejected: 0 }, extra);
      // The body of a request we don't serve is not read.
      closeAfterResponse(req, res);
      return;
    }

    const address = (peer?.remoteAddress ?? '').replace(/^::ffff:/, '');
    const shedFor = deps.failedAuth.shedSeconds(address);
    if (shedFor > 0) {
      deps.metrics.rateLimited.inc({ limit: 'failed_auth' });
      closeAfterResponse(req, res);
      finish(
        req, res, requestId, started,
        requestErrorOutcome(requestError('RATE_LIMITED', 'too many failed authentication attempts from this address')),
        { 'retry-after': String(shedFor) },
      );
      return;
    }

    const tooLarge = () => {
      closeAfterResponse(req, res);
      finish(req, res, requestId, started, requestErrorOutcome(requestError('PAYLOAD_TOO_LARGE')));
    };
    const declared = req.headers['content-length'];
    if (declared !== undefined && Number(declared) > MAX_BODY_BYTES) {
      tooLarge();
      return;
    }

    // HTTP/1.1 bodies are bounded by the server's requestTimeout (swept every second); HTTP/2
    // streams have no such timeout in Node, so each gets its own deadline. Either covers the time
    // spent waiting for the body budget too.
    let done = false;
    const deadline =
      'stream' in req
        ? setTimeout(() => {
            done = true;
            req.stream.close(h2.NGHTTP2_CANCEL);
          }, requestTimeoutMs)
        : undefined;
    const readBody = (budget: BodyReservation): void => {
      // A large body with a known length is copied straight into one buffer of its own: the
      // socket's chunks die young instead of living until a final concat (which would hold the
      // body twice), and the buffer can later be transferred to the queue's writer without a copy.
      let whole = reserved >= PREALLOCATE_FROM && declared !== undefined ? Buffer.allocUnsafeSlow(reserved) : null;
      const chunks: Buffer[] = [];
      let size = 0;
      const stop = () => {
        done = true;
        if (deadline) clearTimeout(deadline);
        req.removeAllListeners('data');
      };
      req.on('data', (chunk: Buffer) => {
        if (done) return;
        size += chunk.length;
        if (size > MAX_BODY_BYTES) {
          stop();
          req.pause();
          tooLarge();
          return;
        }
        if (size > reserved) budget.grow(Math.min(chunk.length, size - reserved));
        if (whole && size <= whole.length) {
          chunk.copy(whole, size - chunk.length);
          return;
        }
        if (whole) {
          // More than Content-Length said (HTTP/1.1's parser never allows it): keep what came as chunks.
          chunks.push(whole.subarray(0, size - chunk.length));
          whole = null;
        }
        chunks.push(chunk);
      });
      req.on('error', () => stop());
      req.on('end', () => {
        if (done) return;
        stop();
        // HTTP/2: a stream reset or a lost connection ends the request too, with a truncated body.
        if ('stream' in req && req.stream.destroyed) return;
        const body = whole ? whole.subarray(0, size) : chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
        handleEventsRequest(deps, req.headers, body, requestId).then(
          (outcome) => {
            if (outcome.status === 401) deps.failedAuth.recordFailure(address);
            finish(req, res, requestId, started, outcome);
          },
          (error: unknown) => {
            deps.logger.error({ request_id: requestId, err: { type: (error as Error)?.name, message: (error as Error)?.message } }, 'request failed');
            finish(req, res, requestId, started, requestErrorOutcome(requestError('BACKEND_UNAVAILABLE')));
          },
        );
      });
    };

    // Not read until the body budget has room: until then the bytes wait in the socket (see body-budget.ts).
    let reservation: BodyReservation | null = null;
    let closed = false;
    const declaredBytes = Number(declared);
    const reserved = declared !== undefined && Number.isSafeInteger(declaredBytes) && declaredBytes >= 0 ? declaredBytes : CHUNKED_RESERVATION;
    const withdraw = bodyBudget.reserve(reserved, (granted) => {
      reservation = granted;
      if (closed) granted.release();
      else readBody(granted);
    });
    res.on('close', () => {
      closed = true;
      if (deadline) clearTimeout(deadline);
      withdraw();
      reservation?.release();
    });
  });

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
          if ((socket as import('node:tls').TLSSocket).alpnProtocol === 'h2') continue;
          if ((active.get(socket) ?? 0) === 0) socket.end();
        }
      });
    },
  };
}
