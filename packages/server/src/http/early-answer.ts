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
 * - HTTP/2: the stream is closed with NO_ERROR once the answer is written; the session lives on.
 * - Called once per early answer, never per chunk: no state beyond the `closing` set of the server.
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
