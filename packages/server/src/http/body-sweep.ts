/**
 * The sweep that drops request bodies which stall or crawl (and HTTP/2 streams past the request
 * timeout), for public-server.ts (each BodyReader, body-reader.ts, is a BodyWatch).
 *
 * Why a sweep: one interval every SWEEP_MS checks every body under way, so a request costs one
 * BodyWatch object and no timer of its own (a timer per request would be an allocation and a
 * timer-list insertion on the hot path). The handler stamps a coarse clock, refreshed here, rather
 * than reading performance.now() per chunk.
 *
 * Invariants and hazards:
 * - A body must keep arriving: no bytes for bodyIdleTimeoutMs (from the head, or between chunks)
 *   and the request is dropped; an untrusted body (no request on its connection has passed the
 *   HMAC yet) must also average minBodyBytesPerSecond after that grace.
 * - A body paused by us, waiting for the body budget, is not the client's stall: on HTTP/1.1 the
 *   buffered bytes show the client's progress, and a body already whole in memory is admitted at
 *   once (admitNow) rather than left waiting. HTTP/2 shows no end of body while paused: a waiting
 *   stream is left to the request timeout.
 * - A drop caused by the client (idle, too slow) counts as a failed-auth strike for its address,
 *   so a slow-body flood is shed like a bad-credentials flood; the request timeout does not.
 * - The handler removes a watch when its body completes or its response closes: a watch left
 *   behind would be swept (and its connection destroyed) after the response.
 */
import { constants as h2, type Http2ServerRequest } from 'node:http2';
import type { IncomingMessage } from 'node:http';
import type { Logger } from '../observability/logger.js';
import type { FailedAuthShedder } from '../rate-limit/failed-auth-shedder.js';

export const DEFAULT_BODY_IDLE_TIMEOUT_MS = 10_000;
export const DEFAULT_MIN_BODY_BYTES_PER_SECOND = 64 * 1024;
/** How often body deadlines are checked. */
export const SWEEP_MS = 500;

/** A body being waited for or read, as the sweep sees it: one object per request, no timer each. */
export interface BodyWatch {
  readonly req: IncomingMessage | Http2ServerRequest;
  readonly requestId: string;
  readonly address: string;
  /** The key id the request names (unverified), for the failed-authentication shedder. */
  readonly keyId: string | undefined;
  readonly untrusted: boolean;
  /** Coarse clock (ms) when the head was handled. */
  readonly startedAt: number;
  /** Last time body bytes came in (or the head, or the budget admitted it). */
  lastDataAt: number;
  /** When the budget admitted it; 0 before. */
  admittedAt: number;
  bytes: number;
  /** Waiting for the body budget: the pause is ours, not the client's. */
  paused: boolean;
  /** HTTP/1.1, while paused: bytes Node buffered behind the pause when last looked at. */
  buffered: number;
  /** While paused: admits the request now (its body turned out to be whole in memory). */
  admitNow: (() => void) | null;
}

/** The deadlines the sweep enforces (one object per server). */
export interface BodySweepLimits {
  readonly requestTimeoutMs: number;
  readonly bodyIdleTimeoutMs: number;
  readonly minBodyBytesPerSecond: number;
}

/** One pass over the watched bodies at time `clock`: drops (and forgets) those past a deadline. */
export function sweepBodies(watched: Set<BodyWatch>, clock: number, limits: BodySweepLimits, logger: Logger, failedAuth: FailedAuthShedder): void {
  const { requestTimeoutMs, bodyIdleTimeoutMs, minBodyBytesPerSecond } = limits;
  for (const watch of watched) {
    const h2req = 'stream' in watch.req;
    let reason: string | null = null;
    if (h2req && clock - watch.startedAt > requestTimeoutMs) reason = 'request timeout';
    else if (watch.paused) {
      // Waiting for the budget. On HTTP/1.1 Node keeps reading the socket into the paused request
      // until its buffer is full, so the client's progress stays visible: a body that is whole by
      // now is admitted (its bytes are in memory anyway); one whose buffer is not full and has not
      // grown for the idle timeout is a stalled client, not our pause. (HTTP/2 shows no end of
      // body while paused: a waiting stream is left to the request timeout.)
      if (h2req) continue;
      const req = watch.req as IncomingMessage;
      if (req.complete) {
        watch.admitNow?.();
        continue;
      }
      if (req.readableLength !== watch.buffered) {
        watch.buffered = req.readableLength;
        watch.lastDataAt = clock;
        continue;
      }
      if (req.readableLength >= req.readableHighWaterMark || clock - watch.lastDataAt <= bodyIdleTimeoutMs) continue;
      reason = 'body idle timeout';
    } else if (clock - watch.lastDataAt > bodyIdleTimeoutMs) reason = 'body idle timeout';
    else if (
      watch.untrusted && watch.admittedAt > 0 && minBodyBytesPerSecond > 0 &&
      watch.bytes < ((clock - watch.admittedAt - bodyIdleTimeoutMs) / 1000) * minBodyBytesPerSecond
    ) reason = 'body slower than the minimum rate';
    if (reason === null) continue;
    watched.delete(watch);
    // The HTTP/1.1 request timeout is Node's own (no log line); these are ours.
    logger.info({ request_id: watch.requestId, dropped: reason, body_bytes: watch.bytes, http: watch.req.httpVersion }, 'request dropped');
    if (reason !== 'request timeout') failedAuth.recordFailure(watch.address, watch.keyId);
    if ('stream' in watch.req) {
      if (!watch.req.stream.destroyed) watch.req.stream.close(h2.NGHTTP2_CANCEL);
    } else {
      watch.req.socket.destroy();
    }
  }
}
