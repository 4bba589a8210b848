/**
 * Ending an exchange after an answer given before (or without) reading the whole request body:
 * the request head was refused, or the body went over the limit.
 *
 * Why it is delicate:
 * - HTTP/1.1: the response says `Connection: close` (public-server.ts adds the header for sockets
 *   in `closing`) and requests pipelined behind it are never processed. The socket is half-closed
 *   once the answer is written and destroyed LINGER_MS later, reading (and dropping) what the
 *   client still sends meanwhile: an immediate destroy with unread input makes the kernel reset the
 *   connection, and the reset can discard the answer before the client reads it.
 * - HTTP/2: the stream is closed with NO_ERROR once the answer is written; the session lives on,
 *   unless it is past its refusals (below).
 * - Called once per early answer, never per chunk: no state beyond the `closing` set of the server
 *   and the refusal counts.
 *
 * Refusals per untrusted connection (audit: sessions held open by refused requests). A connection
 * (HTTP/2 session, HTTP/1.1 socket) on which no request passed the HMAC may carry at most
 * MAX_UNTRUSTED_REFUSALS requests answered without authentication (any 4xx before the HMAC: 401,
 * shed 429, 404, 400...); the answer to the last one ends it: HTTP/2 GOAWAY sent before that answer
 * (streams under way finish, no new ones), HTTP/1.1 `Connection: close` (most such answers close
 * HTTP/1.1 at once anyway; a 401 after the body did not). A client that holds a secret is never
 * counted: its first signed request makes the connection trusted. Counted in public-server.ts's
 * answer, only for answers without a verified key id: the signed path pays one property test. The
 * count lives in the connection's state (public-tls-server.ts ConnectionState, the one place that
 * also says whether it is trusted); countRefusal says when its answer is what ends the connection,
 * for ecapi_untrusted_connections_closed_total{reason="refusals"}.
 */
import { constants as h2, type Http2ServerRequest, type Http2ServerResponse } from 'node:http2';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/** After an early answer, how long the socket still reads (and drops) what the client sends before it is destroyed. */
const LINGER_MS = 1000;

/**
 * Replaces the socket's destroySoon(), which node:http calls once a `Connection: close` response is
 * written: half-close, keep reading (and dropping) for LINGER_MS, then destroy.
 */
function lingerThenDestroy(this: Socket): void {
  this.end();
  setTimeout(() => this.destroy(), LINGER_MS).unref();
}

/**
 * Ends the exchange after this response without reading the rest of the request body. `closing`
 * is the server's set of HTTP/1.1 sockets that close after the response being written.
 */
export function closeAfterResponse(req: IncomingMessage | Http2ServerRequest, res: ServerResponse | Http2ServerResponse, closing: WeakSet<Socket>): void {
  if ('stream' in req) {
    const stream = req.stream;
    res.on('finish', () => {
      if (!stream.destroyed) stream.close(h2.NGHTTP2_NO_ERROR);
    });
    return;
  }
  const socket = req.socket;
  closing.add(socket);
  // node:http sees our `Connection: close` and calls destroySoon() once the response is written.
  (socket as Socket & { destroySoon(): void }).destroySoon = lingerThenDestroy;
  res.on('finish', () => {
    if (!socket.destroyed && socket.writable) lingerThenDestroy.call(socket);
  });
}

/** Requests answered without authentication on a connection where none passed the HMAC; the last one's answer ends it. */
export const MAX_UNTRUSTED_REFUSALS = 3;

/**
 * Counts a refusal (an answer without authentication) on an untrusted connection, and ends the
 * connection after this answer when it is the MAX_UNTRUSTED_REFUSALS-th. Call before the response
 * is written (HTTP/1.1's `Connection: close` is decided from `closing`). `connection`: the state of
 * the request's connection (public-tls-server.ts connectionOf), where the count is kept. True when
 * this answer ends a connection that was not closing already (an HTTP/1.1 early answer closes its
 * connection anyway: not the refusals' doing).
 */
export function countRefusal(req: IncomingMessage | Http2ServerRequest, res: ServerResponse | Http2ServerResponse, connection: { refusals: number }, closing: WeakSet<Socket>): boolean {
  const count = ++connection.refusals;
  if (count < MAX_UNTRUSTED_REFUSALS) return false;
  if ('stream' in req) {
    // GOAWAY now, before this answer is written: it reaches the client ahead of the answer, so no
    // request the client sends after reading the answer is served (GOAWAY on 'finish' raced with a
    // request read before that event ran). This stream, already open, still completes.
    const session = req.stream.session;
    if (session === undefined || session.closed || session.destroyed) return false;
    session.close();
    return true;
  }
  if (closing.has(req.socket)) return false;
  closeAfterResponse(req, res, closing);
  return true;
}
