/**
 * The TLS server of the public port (node:http2 createSecureServer with allowHTTP1) and the
 * connections it tracks, without a request handler: public-server.ts adds it. Separate so that
 * the bench's ablation ladder (bench/ladder-server.ts) can price this server alone under the
 * reference's handler.
 *
 * Invariants and hazards (the threat model and every bound: docs/SECURITY.md):
 * - TLS 1.3 only: plain HTTP or TLS < 1.3 never reaches a handler. Every connection's first bytes
 *   are read first (connection-front.ts): a plain-HTTP request gets a readable 400 saying to use
 *   https:// and is closed; with `proxyProtocolFrom`, a PROXY header from a trusted peer sets the
 *   connection's client address (clientAddressOf), and one from any other peer closes it.
 * - A connection must send its first bytes within handshakeTimeoutMs, then finish its handshake within handshakeTimeoutMs (a constructor option: Node
 *   ignores it when set afterwards), and at most maxPendingHandshakes connections may be
 *   mid-handshake: past that the oldest is dropped, so silent sockets cannot pile up and cannot
 *   lock out real clients (a real handshake takes one round trip, an attacker would have to open
 *   that many in that time).
 * - Slow clients: headers must arrive within headersTimeoutMs and the whole request within
 *   requestTimeoutMs, else the connection or stream is destroyed; idle keep-alive connections are
 *   closed after keepAliveTimeoutMs. Node checks the HTTP/1.1 headers timeout only when it sweeps
 *   its connection list, so that sweep is made to run every second.
 * - Trust, tracked here only. A connection is *untrusted* until a request on it passes the HMAC
 *   (public-server.ts calls trust()). Each established connection has one ConnectionState (trusted,
 *   and the refusals early-answer.ts counts), made at 'secureConnection' and hung on the TLS socket
 *   and on its HTTP/2 session under one symbol, so a request finds it with one property read
 *   (connectionOf: the HTTP/1.1 socket's, or its session's, which is its socket's); `untrusted`
 *   indexes those not yet trusted, oldest first, for the sweep and the cap. Nothing else keeps a
 *   set of trusted connections.
 * - Connections that never authenticated (audit: 3,000 HTTP/2 sessions held open by one bogus
 *   request every 50 s each). An untrusted connection is closed keepAliveTimeoutMs after its
 *   handshake whatever it sends, so refused requests (401, shed 429, 404...) never extend its life
 *   (Node's own idle timer is reset by every stream): HTTP/2 gets GOAWAY (streams under way
 *   finish), an idle HTTP/1.1 connection is ended, a busy one gets requestTimeoutMs more, then is
 *   destroyed. One sweep a second walks the untrusted connections (no timer per connection); a
 *   trusted connection costs nothing here and keeps Node's idle timeout alone. (The cap on refusals
 *   per untrusted connection: early-answer.ts.)
 * - At most maxConnections established connections (default 10,000): past it the **oldest
 *   untrusted** one is dropped to make room, like handshakes, so an attacker filling the cap cannot
 *   lock out new senders (each gets its first request's round trip before it could be pushed out),
 *   and trusted connections are never dropped for it; when every connection is trusted, the new one
 *   is refused. Node's server.maxConnections is not used: it refuses the newest.
 * - The socket, active-request and session sets are what shutdown() walks: a socket leaves them
 *   only on 'close', so a graceful shutdown never misses a connection.
 * - What these defences close is told to `onDefenceClose` (public-server.ts counts it on /metrics:
 *   ecapi_untrusted_connections_closed_total), once per connection and only when the close is
 *   theirs: a connection already closing (after a refusal's GOAWAY, say) is not counted again.
 * - What Node's own layers end is told to the other hooks, from the events Node emits on its error
 *   and timeout paths (nothing is added per request or per successful handshake):
 *   `onHandshakeFailure` ('tlsClientError', by the error's code: handshakeFailureReasonOf, a closed
 *   mapping; and what connection-front.ts refuses), `onTimeout` ('clientError' with Node's
 *   ERR_HTTP_REQUEST_TIMEOUT: `headers` before a request head was parsed, `request` after; the
 *   server's 'timeout': `idle`), `onProtocolError` ('clientError' with a parser error that gets an
 *   answer: `http1`; 'sessionError' with ERR_HTTP2_ERROR, nghttp2 ending a session with GOAWAY:
 *   `http2`). A connection dropped by the pending-handshake cap is destroyed with an error of its
 *   own (HANDSHAKE_CAP_CODE), so the TLS layer's report of it is not counted a second time. What
 *   nghttp2 refuses per stream (RST_STREAM for too many header fields, say) reaches no JavaScript
 *   event and is not counted.
 */
import { createSecureServer, type Http2SecureServer, type Http2ServerRequest, type ServerHttp2Session } from 'node:http2';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { HandshakeFailureReason, ProtocolErrorLayer, PublicTimeout, UntrustedCloseReason } from '../observability/service-metrics.js';
import { installConnectionFront } from './connection-front.js';
import { parseTrustedProxies } from './trusted-proxies.js';

export interface PublicServerConfig {
  readonly cert: string;
  readonly key: string;
  readonly headersTimeoutMs?: number;
  readonly requestTimeoutMs?: number;
  readonly keepAliveTimeoutMs?: number;
  /** A TLS handshake must complete within this; default 10 s. */
  readonly handshakeTimeoutMs?: number;
  /** Connections still in their TLS handshake; past this the oldest is dropped. Default 1024. */
  readonly maxPendingHandshakes?: number;
  /** Request-body bytes this process holds at once (body-budget.ts); default 16 MiB. */
  readonly bodyBudgetBytes?: number;
  /** A request whose body sends nothing for this long (after its head, or between chunks) is dropped; default 10 s. */
  readonly bodyIdleTimeoutMs?: number;
  /** An untrusted body must average this many bytes per second after bodyIdleTimeoutMs; default 64 KiB/s, 0 turns it off. */
  readonly minBodyBytesPerSecond?: number;
  /**
   * `serve --proxy-protocol`: addresses and CIDRs of the L4 balancers whose PROXY protocol (v1, v2)
   * headers are believed; absent or empty: no PROXY header is accepted from anyone.
   */
  readonly proxyProtocolFrom?: readonly string[];
  /** Established connections per process; past it the oldest untrusted one is dropped. Default 10,000. */
  readonly maxConnections?: number;
}

/** The client address of a connection, when a trusted PROXY header gave one (see clientAddressOf). */
const CLIENT_ADDRESS = Symbol('ecapi.clientAddress');
/**
 * On a TLS socket: its HTTP/2 session (written through the session's socket proxy, which forwards
 * other properties to the TLS socket).
 */
const SESSION = Symbol('ecapi.session');
/** On a TLS socket and on its HTTP/2 session: the connection's one ConnectionState. */
const STATE = Symbol('ecapi.connection');
type TrackedSocket = TLSSocket & { [SESSION]?: ServerHttp2Session; [CLIENT_ADDRESS]?: string; [STATE]?: Connection };

/**
 * What the public port knows of one established connection (an HTTP/1.1 socket, or an HTTP/2
 * session and its socket): the one place its trust is kept.
 */
export interface ConnectionState {
  /** A request on this connection passed the HMAC (PublicTlsServer.trust); never reset. */
  readonly trusted: boolean;
  /** Requests answered without authentication while untrusted (early-answer.ts countRefusal). */
  refusals: number;
}

/** The state as this module keeps it: an untrusted connection's deadline, and its socket. */
interface Connection extends ConnectionState {
  trusted: boolean;
  /** When the sweep closes it if still untrusted (performance.now() ms). */
  deadline: number;
  /** An HTTP/1.1 connection found busy at its deadline got requestTimeoutMs more. */
  graced: boolean;
  readonly socket: TrackedSocket;
}

/**
 * The state of a request's connection: one property read (HTTP/2: on its session, the same object
 * as on the session's TLS socket). Undefined only for a connection this server did not establish
 * (closed, or refused by the connection cap, before its request could arrive): treat as untrusted.
 */
export function connectionOf(req: IncomingMessage | Http2ServerRequest): ConnectionState | undefined {
  return 'stream' in req
    ? (req.stream.session as (ServerHttp2Session & { [STATE]?: Connection }) | undefined)?.[STATE]
    : (req.socket as TrackedSocket)[STATE];
}

export interface PublicTlsServerHooks {
  /**
   * A connection closed by one of this server's defences: `deadline`, `connection_cap`,
   * `handshake_cap` (never `refusals`: early-answer.ts ends those, public-server.ts counts them).
   */
  readonly onDefenceClose?: (reason: UntrustedCloseReason) => void;
  /** A connection that ended before its TLS handshake completed (not one the pending-handshake cap dropped: onDefenceClose). */
  readonly onHandshakeFailure?: (reason: HandshakeFailureReason) => void;
  /** Node's HTTP/1.1 headers and request timeouts, and the idle timeout (the body guards are public-server.ts's). */
  readonly onTimeout?: (timeout: Extract<PublicTimeout, 'headers' | 'request' | 'idle'>) => void;
  /** A malformed HTTP/1.1 request the parser refused (answered), an HTTP/2 session nghttp2 ended for a protocol error. */
  readonly onProtocolError?: (protocol: ProtocolErrorLayer) => void;
}

/** The code of the error a connection dropped by the pending-handshake cap is destroyed with. */
const HANDSHAKE_CAP_CODE = 'ERR_HANDSHAKE_CAP_DROP';

/** TLS alerts by which a client refuses the server's certificate (OpenSSL 3 spells the SSLv3 ones `SSL/TLS`). */
const CERTIFICATE_ALERT = /^ERR_SSL_(?:SSLV3|SSL\/TLS|TLSV1)_ALERT_(?:BAD_CERTIFICATE|UNSUPPORTED_CERTIFICATE|CERTIFICATE_REVOKED|CERTIFICATE_EXPIRED|CERTIFICATE_UNKNOWN|UNKNOWN_CA)$/;

/**
 * The label of a handshake failure the TLS layer reported ('tlsClientError'), from the error's code
 * alone (never its message): a closed mapping. Null for a drop by the pending-handshake cap
 * (counted as that).
 */
export function handshakeFailureReasonOf(code: string | undefined): HandshakeFailureReason | null {
  if (code === undefined) return 'other';
  if (code === HANDSHAKE_CAP_CODE) return null;
  if (code === 'ERR_TLS_HANDSHAKE_TIMEOUT') return 'timeout';
  if (code === 'ECONNRESET' || code === 'EPIPE' || code === 'ECONNABORTED' || code === 'ETIMEDOUT') return 'reset';
  if (CERTIFICATE_ALERT.test(code)) return 'certificate';
  if (code.startsWith('ERR_SSL_')) return 'protocol';
  return 'other';
}

/**
 * The client's address of a request's connection: the one a trusted PROXY header named, else the
 * TCP peer's; IPv4-mapped IPv6 as plain IPv4. Accepts an HTTP/2 session's socket (a proxy of the
 * TLS socket: the symbol is read through it).
 */
export function clientAddressOf(socket: Socket | undefined): string {
  if (socket === undefined) return '';
  const address = (socket as Socket & { [CLIENT_ADDRESS]?: string })[CLIENT_ADDRESS] ?? socket.remoteAddress ?? '';
  return address.startsWith('::ffff:') ? address.slice(7) : address;
}

export const DEFAULT_HANDSHAKE_TIMEOUT_MS = 10_000;
/** HTTP/2 SETTINGS_MAX_HEADER_LIST_SIZE (names, values and 32 bytes a field, decoded). HTTP/1.1 heads: Node's 16 KiB. */
export const MAX_HEADER_LIST_BYTES = 64 * 1024;

/** Node's bare answers to what its HTTP/1.1 parser refuses (as node:http writes them), by error code. */
const BAD_REQUEST = 'HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n';
const parserAnswers: Record<string, string> = {
  HPE_HEADER_OVERFLOW: 'HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n',
  HPE_CHUNK_EXTENSIONS_OVERFLOW: 'HTTP/1.1 413 Payload Too Large\r\nConnection: close\r\n\r\n',
  ERR_HTTP_REQUEST_TIMEOUT: 'HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n',
};
/** After such an answer, the socket is destroyed this long after its half-close. */
const CLIENT_ERROR_LINGER_MS = 1000;
export const DEFAULT_MAX_PENDING_HANDSHAKES = 1024;
export const DEFAULT_MAX_CONNECTIONS = 10_000;
/** How often the untrusted connections are checked against their deadline. */
const UNTRUSTED_SWEEP_MS = 1000;

/** The TLS server of the public port and the connections it tracks (for shutdown). */
export interface PublicTlsServer {
  readonly server: Http2SecureServer;
  /** TLS sockets past their handshake. */
  readonly sockets: Set<Socket>;
  /** HTTP/1.1 sockets: requests under way on each. */
  readonly active: Map<Socket, number>;
  /** HTTP/2 sessions. */
  readonly sessions: Set<ServerHttp2Session>;
  /**
   * A request on this connection (connectionOf) passed the HMAC: from now on it is trusted, no
   * longer closed for being untrusted nor dropped for the connection cap. Later calls do nothing.
   */
  trust(connection: ConnectionState): void;
  /** Connections on which no request passed the HMAC yet (for tests and metrics). */
  readonly untrustedConnections: () => number;
}

/**
 * The node:http2 secure server (TLS 1.3, ALPN h2 and http/1.1) with the public port's timeouts and
 * connection tracking (handshake bound, sockets, sessions), without a request handler.
 */
export function createPublicTlsServer(config: PublicServerConfig, hooks: PublicTlsServerHooks = {}): PublicTlsServer {
  const closedBy = hooks.onDefenceClose ?? ((): void => {});
  const handshakeFailed = hooks.onHandshakeFailure ?? ((): void => {});
  const timedOut = hooks.onTimeout ?? ((): void => {});
  const protocolError = hooks.onProtocolError ?? ((): void => {});
  const headersTimeoutMs = config.headersTimeoutMs ?? 10_000;
  const requestTimeoutMs = config.requestTimeoutMs ?? 30_000;
  const keepAliveTimeoutMs = config.keepAliveTimeoutMs ?? 65_000;
  const maxPendingHandshakes = config.maxPendingHandshakes ?? DEFAULT_MAX_PENDING_HANDSHAKES;
  const maxConnections = config.maxConnections ?? DEFAULT_MAX_CONNECTIONS;
  const server = createSecureServer({
    // Node >= 24 refuses an HTTP/1.1 request without Host itself, with a bare 400 and no body (Node
    // 20 and 22 let it through): we answer it in the request handler, with the reason, on every version.
    ...({ requireHostHeader: false } as object),
    cert: config.cert,
    key: config.key,
    allowHTTP1: true,
    minVersion: 'TLSv1.3',
    maxVersion: 'TLSv1.3',
    ALPNProtocols: ['h2', 'http/1.1'],
    // maxHeaderListSize must be given to be sent: Node advertises none by default, and nghttp2 then
    // takes header blocks up to its CONTINUATION bound (~128 KiB measured). Enforced once the client
    // acknowledges the SETTINGS (before that, that bound and maxSessionMemory hold).
    settings: { maxConcurrentStreams: 256, maxHeaderListSize: MAX_HEADER_LIST_BYTES },
    // A client that connects and never completes the handshake is dropped. Only read at construction.
    handshakeTimeout: config.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS,
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

  // First bytes: plain HTTP answered, PROXY headers from trusted peers read (connection-front.ts).
  const front = installConnectionFront(server, {
    trustedProxies: config.proxyProtocolFrom !== undefined && config.proxyProtocolFrom.length > 0
      ? parseTrustedProxies(config.proxyProtocolFrom.join(','))
      : null,
    timeoutMs: config.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS,
    onRefused: handshakeFailed,
  });

  // Connections mid-handshake (their first bytes included), oldest first (a Map keeps insertion order), by peer address and port.
  const handshaking = new Map<string, Socket>();
  server.on('connection', (raw: Socket) => {
    const id = `${raw.remoteAddress}|${raw.remotePort}`;
    handshaking.set(id, raw);
    raw.once('close', () => {
      if (handshaking.get(id) === raw) handshaking.delete(id);
    });
    if (handshaking.size > maxPendingHandshakes) {
      const [oldestId, oldest] = handshaking.entries().next().value as [string, Socket];
      handshaking.delete(oldestId);
      // With an error of our own: the TLS layer passes it on to 'tlsClientError', which then knows
      // this close is counted already (a bare destroy() would be reported as ECONNRESET).
      oldest.destroy(Object.assign(new Error('dropped: too many connections mid-handshake'), { code: HANDSHAKE_CAP_CODE }));
      closedBy('handshake_cap');
    }
  });

  const sockets = new Set<Socket>();
  const active = new Map<Socket, number>();
  /** Established connections on which no request passed the HMAC yet, oldest first (a Set keeps insertion order). */
  const untrusted = new Set<Connection>();
  /** The connection is closing already (HTTP/2 GOAWAY sent, HTTP/1.1 ended): a close now is not a defence's doing. */
  const closing = (socket: TrackedSocket): boolean => {
    const session = socket[SESSION];
    if (session !== undefined && (session.closed || session.destroyed)) return true;
    return socket.writableEnded || socket.destroyed;
  };
  /** Closes an untrusted connection politely: HTTP/2 GOAWAY (its streams finish), HTTP/1.1 end. */
  const closeUntrusted = (socket: TrackedSocket): void => {
    const session = socket[SESSION];
    if (session !== undefined) {
      if (!session.closed && !session.destroyed) session.close();
    } else {
      socket.end();
    }
  };
  server.on('secureConnection', (socket: TLSSocket) => {
    handshaking.delete(`${socket.remoteAddress}|${socket.remotePort}`);
    const client = front.takeClientAddress(socket.remoteAddress, socket.remotePort);
    const tracked = socket as TrackedSocket;
    if (client !== undefined) tracked[CLIENT_ADDRESS] = client;
    // The connection cap: make room by dropping the oldest untrusted connection; none: refuse this one.
    if (sockets.size >= maxConnections) {
      const oldest = untrusted.values().next().value as Connection | undefined;
      if (oldest === undefined) {
        socket.destroy();
        closedBy('connection_cap');
        return;
      }
      untrusted.delete(oldest);
      if (!closing(oldest.socket)) closedBy('connection_cap');
      oldest.socket.destroy();
    }
    const connection: Connection = { trusted: false, refusals: 0, deadline: performance.now() + keepAliveTimeoutMs, graced: false, socket: tracked };
    tracked[STATE] = connection;
    // HTTP/2: node:http2 made the session (and our 'session' handler ran) before this handler.
    const session = tracked[SESSION] as (ServerHttp2Session & { [STATE]?: Connection }) | undefined;
    if (session !== undefined) session[STATE] = connection;
    sockets.add(socket);
    untrusted.add(connection);
    socket.on('close', () => {
      sockets.delete(socket);
      active.delete(socket);
      untrusted.delete(connection);
    });
  });
  // Untrusted connections past their deadline (see the header): refused requests never move it.
  const untrustedSweep = setInterval(() => {
    const now = performance.now();
    for (const connection of untrusted) {
      if (now < connection.deadline) continue;
      const socket = connection.socket;
      const busy = (active.get(socket) ?? 0) > 0 && socket[SESSION] === undefined;
      if (busy && !connection.graced) {
        connection.graced = true;
        connection.deadline = now + requestTimeoutMs;
        continue;
      }
      untrusted.delete(connection);
      if (!closing(socket)) closedBy('deadline');
      if (busy) socket.destroy();
      else closeUntrusted(socket);
    }
  }, UNTRUSTED_SWEEP_MS);
  untrustedSweep.unref();
  server.on('close', () => clearInterval(untrustedSweep));
  // Node's own answers to an HTTP/1.1 request its parser refuses (400, 408, 413, 431), written with
  // end() instead of Node's write() + destroy(): TLS completes a write on the next turn of the event
  // loop, so output still queued behind the handshake's last records (a connection handed over by
  // connection-front.ts finishes its handshake later in the turn) was lost to the destroy. end()
  // flushes, then half-closes; the socket is destroyed a moment later, unread input dropped.
  const refused = new WeakSet<Socket>();
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) => {
    const code = error.code ?? '';
    const answer = parserAnswers[code] ?? (code.startsWith('HPE_') ? BAD_REQUEST : undefined);
    // The request under way (its head was parsed); none while a head is still awaited.
    const message = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    // Counted once per connection (a refused socket may report more on its way out: the EOF of its
    // half-sent request, say), and never for TLS errors, which Node reports here too ('tlsClientError' counts those).
    if (answer !== undefined && !refused.has(socket) && !socket.destroyed) {
      // Node's HTTP/1.1 headers and request timeouts share this code: the head parsed or not tells them apart.
      if (code === 'ERR_HTTP_REQUEST_TIMEOUT') timedOut(message === undefined ? 'headers' : 'request');
      // A head cut short by the client closing is its leaving, not a malformed request.
      else if (code !== 'HPE_INVALID_EOF_STATE') protocolError('http1');
    }
    if (answer === undefined || refused.has(socket) || !socket.writable || message?.headersSent) {
      socket.destroy();
      return;
    }
    refused.add(socket);
    socket.end(answer);
    setTimeout(() => socket.destroy(), CLIENT_ERROR_LINGER_MS).unref();
  });
  server.on('tlsClientError', (error: NodeJS.ErrnoException) => {
    // Handshake failures (TLS 1.2 clients, scanners, timeouts): nothing to answer, nothing to log per
    // event; counted by the error's code (never its message).
    const reason = handshakeFailureReasonOf(error.code);
    if (reason !== null) handshakeFailed(reason);
  });
  // nghttp2 ended a session for the client's protocol error (more concurrent streams than
  // SETTINGS_MAX_CONCURRENT_STREAMS, an invalid or oversized frame, the rapid-reset and flood
  // mitigations): Node destroys the session with ERR_HTTP2_ERROR after the GOAWAY. Other session
  // errors (a connection reset, a client's own GOAWAY with an error code) are not refusals.
  server.on('sessionError', (error: NodeJS.ErrnoException) => {
    if (error.code === 'ERR_HTTP2_ERROR') protocolError('http2');
  });
  // The idle timeout (server.setTimeout above): an HTTP/1.1 socket or an HTTP/2 session with nothing
  // sent either way for keepAliveTimeoutMs. Node destroys it when no one listens (node:http
  // socketOnTimeout, node:http2 sessionOnTimeout); listening, we must, as it would. One already
  // ending (an untrusted one ended at its deadline) is not counted again.
  server.on('timeout', (target: Socket | ServerHttp2Session) => {
    if (!('writableEnded' in target && target.writableEnded) && !target.destroyed) timedOut('idle');
    target.destroy();
  });
  const sessions = new Set<ServerHttp2Session>();
  server.on('session', (session) => {
    sessions.add(session);
    // Written through the socket proxy onto the TLS socket (before its 'secureConnection' handler runs).
    (session.socket as TrackedSocket)[SESSION] = session;
    session.on('close', () => sessions.delete(session));
  });
  const trust = (state: ConnectionState): void => {
    const connection = state as Connection;
    if (connection.trusted) return;
    connection.trusted = true;
    untrusted.delete(connection);
  };
  return { server, sockets, active, sessions, trust, untrustedConnections: () => untrusted.size };
}
