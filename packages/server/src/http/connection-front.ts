/**
 * The public port's raw TCP side, before TLS: every accepted connection's first bytes are read
 * here, then the connection is handed to the TLS server with those bytes put back (unshifted, not
 * copied: Node's TLS socket feeds a raw socket's buffered bytes to OpenSSL before reading on).
 *
 * What the first bytes decide (first-bytes.ts):
 * - a TLS record (0x16): handed on at once; the common path costs one read callback per connection;
 * - a PROXY protocol header (proxy-protocol.ts), only with `serve --proxy-protocol <CIDRs>` and only
 *   from a peer inside those CIDRs: the header is consumed and the client address it names becomes
 *   the connection's client address (clientAddressOf in public-tls-server.ts), for shedding and
 *   rate limiting; from any other peer, or without the option, a PROXY header closes the connection
 *   (a client must not choose its own address). From a trusted peer the header is optional (a
 *   direct connection from inside the balancer's network keeps its own address); the formats cannot
 *   be confused (a ClientHello starts with 0x16).
 * - a plain-HTTP request line ("GET ", "POST " …): answered with a readable HTTP/1.1 400 saying to
 *   use https:// and closed, as nginx does, instead of a failed handshake ("Empty reply from server").
 * - anything else: handed to TLS, whose handshake fails as it always did.
 *
 * Bounds (attacker model: everything here happens before any authentication): the first bytes and
 * the header must arrive within `timeoutMs` (the handshake timeout; the TLS handshake then gets its
 * own), at most `maxHeaderBytes` are buffered, and a connection in this phase counts among the
 * pending handshakes that public-tls-server.ts caps. The client addresses handed to TLS wait in one
 * map only until that connection's handshake ends or it closes.
 *
 * What this front refuses (the timeout, a plain-HTTP request, a PROXY header it does not accept) is
 * told to `onRefused` (public-tls-server.ts: ecapi_tls_handshake_failures_total), on that path only;
 * a connection its client closes before a byte is not (TCP health checks do that all day).
 *
 * Node detail relied on: the TLS server takes connections through its 'connection' listener
 * (tlsConnectionListener), which wraps the raw socket and reads what it already buffered first.
 * installConnectionFront takes that listener out and calls it itself after the first bytes; it
 * throws at start-up if Node ever stops installing it that way (so the tests catch it at once).
 */
import type { BlockList, Socket } from 'node:net';
import type { Server as TlsServer } from 'node:tls';
import { RequestErrors } from '../errors.js';
import type { HandshakeFailureReason } from '../observability/service-metrics.js';
import { classifyFirstBytes } from './first-bytes.js';
import { DEFAULT_PROXY_V2_MAX_BYTES, parseProxyHeader } from './proxy-protocol.js';
import { isTrustedPeer } from './trusted-proxies.js';

export interface ConnectionFrontOptions {
  /** Peers whose PROXY headers are believed (--proxy-protocol); null: no PROXY header is accepted. */
  readonly trustedProxies: BlockList | null;
  /** The first bytes, and a PROXY header, must arrive within this (ms). */
  readonly timeoutMs: number;
  /** The longest PROXY header accepted (v2 with its TLVs). */
  readonly maxHeaderBytes?: number;
  /** A connection this front ended: its first bytes late, a plain-HTTP request answered, a PROXY header refused. */
  readonly onRefused?: (reason: FrontRefusal) => void;
}

/** What connection-front.ts ends before TLS, as ecapi_tls_handshake_failures_total labels it. */
export type FrontRefusal = Extract<HandshakeFailureReason, 'timeout' | 'plain_http' | 'proxy_header'>;

export interface ConnectionFront {
  /**
   * The client address a trusted PROXY header gave the connection from this peer address and port,
   * once (then forgotten); undefined when none did.
   */
  takeClientAddress(peerAddress: string | undefined, peerPort: number | undefined): string | undefined;
}

/** The answer to plain HTTP on the HTTPS port: written raw, then the connection ends. */
const PLAIN_HTTP_BODY = JSON.stringify({ error: RequestErrors.PLAIN_HTTP.message() });
const PLAIN_HTTP_ANSWER = Buffer.from(
  'HTTP/1.1 400 Bad Request\r\n' +
    'Content-Type: application/json\r\n' +
    `Content-Length: ${Buffer.byteLength(PLAIN_HTTP_BODY)}\r\n` +
    'Connection: close\r\n' +
    '\r\n' +
    PLAIN_HTTP_BODY,
  'utf8',
);
/** After the 400, what the client still sends (its body) is read and dropped for this long, at most this much. */
const LINGER_MS = 2_000;
const LINGER_BYTES = 64 * 1024;

function answerPlainHttp(raw: Socket): void {
  raw.end(PLAIN_HTTP_ANSWER);
  // Closing with unread bytes would reset the connection under the answer (the client would see
  // ECONNRESET, not the 400): read and drop the rest of the request for a moment, bounded.
  let dropped = 0;
  raw.on('data', (chunk: Buffer) => {
    dropped += chunk.length;
    if (dropped > LINGER_BYTES) raw.destroy();
  });
  setTimeout(() => raw.destroy(), LINGER_MS).unref();
}

const noop = (): void => undefined;

export function installConnectionFront(server: TlsServer, options: ConnectionFrontOptions): ConnectionFront {
  const tlsListener = server.listeners('connection').find((listener) => listener.name === 'tlsConnectionListener') as
    | ((this: TlsServer, socket: Socket) => void)
    | undefined;
  if (tlsListener === undefined) throw new Error('internal: the TLS server has no tlsConnectionListener (Node changed?)');
  server.removeListener('connection', tlsListener);
  const maxHeaderBytes = options.maxHeaderBytes ?? DEFAULT_PROXY_V2_MAX_BYTES;
  const trustedProxies = options.trustedProxies;
  const refused = options.onRefused ?? noop;
  /** Client addresses from PROXY headers, by peer "address|port", until the TLS handshake ends. */
  const clients = new Map<string, string>();

  server.on('connection', (raw: Socket) => {
    // Errors (ECONNRESET) while we hold the socket, and after: the TLS socket reports its own.
    raw.on('error', noop);
    const proxyAllowed = trustedProxies !== null && isTrustedPeer(trustedProxies, raw.remoteAddress);
    let pending: Buffer | null = null;
    let headerDone = false;
    const timer = setTimeout(() => {
      // Not a client that left (closed before a byte: not counted), nor one the handshake cap dropped.
      if (raw.destroyed) return;
      raw.destroy();
      refused('timeout');
    }, options.timeoutMs);
    timer.unref();

    const handOn = (rest: Buffer): void => {
      clearTimeout(timer);
      raw.removeListener('data', onData);
      raw.pause();
      if (rest.length > 0) raw.unshift(rest);
      tlsListener.call(server, raw);
    };

    const onData = (chunk: Buffer): void => {
      let data = pending === null ? chunk : Buffer.concat([pending, chunk]);
      pending = null;
      if (!headerDone) {
        const kind = classifyFirstBytes(data);
        if (kind === 'proxy') {
          if (!proxyAllowed) {
            clearTimeout(timer);
            raw.destroy();
            refused('proxy_header');
            return;
          }
          const parsed = parseProxyHeader(data, maxHeaderBytes);
          if (parsed.kind === 'invalid') {
            clearTimeout(timer);
            raw.destroy();
            refused('proxy_header');
            return;
          }
          if (parsed.kind === 'incomplete') {
            pending = data;
            return;
          }
          headerDone = true;
          if (parsed.source !== null) {
            const peer = `${raw.remoteAddress}|${raw.remotePort}`;
            clients.set(peer, parsed.source.address);
            raw.once('close', () => clients.delete(peer));
          }
          data = data.subarray(parsed.length);
          if (data.length === 0) return;
        } else if (kind === 'incomplete') {
          pending = data;
          return;
        } else {
          headerDone = true;
        }
      }
      // After the PROXY header (or none): TLS, or plain HTTP.
      const kind = classifyFirstBytes(data);
      if (kind === 'incomplete') {
        pending = data;
        return;
      }
      clearTimeout(timer);
      if (kind === 'http') {
        raw.removeListener('data', onData);
        answerPlainHttp(raw);
        refused('plain_http');
        return;
      }
      // TLS, or bytes TLS will refuse (a second PROXY header included).
      handOn(data);
    };
    raw.on('data', onData);
  });

  return {
    takeClientAddress(peerAddress, peerPort) {
      if (clients.size === 0) return undefined;
      const peer = `${peerAddress}|${peerPort}`;
      const client = clients.get(peer);
      if (client !== undefined) clients.delete(peer);
      return client;
    },
  };
}
