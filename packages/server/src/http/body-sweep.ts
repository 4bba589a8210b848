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
 * - A body paused by us, waiting for the body budget, is not the client's stall, but a client that
 *   stops sending while it waits is. What Node buffered behind the pause shows the client's
 *   progress, and a body already whole in memory is admitted at once (admitNow) rather than left
 *   waiting: HTTP/1.1 the request's buffer and req.complete; HTTP/2 the request's and the stream's
 *   buffers, and the stream's state (remoteClose: the body ended). A waiting request is our pause
 *   while the client cannot send more (HTTP/1.1 the request's buffer is full, Node stopped reading
 *   the socket; HTTP/2 the stream's flow-control window is 0); otherwise no growth for
 *   bodyIdleTimeoutMs drops it like any idle body. So the only waiting requests the request timeout
 *   ends are blocked by us (until the 2026-11-27 audit every waiting HTTP/2 stream was left to it,
 *   and a stream sending 1 byte held its place for 30 s). HTTP/2 stream state is read from
 *   nghttp2 (an object each call): only for waiting streams, whose number the budget caps.
 * - A drop caused by the client (idle, too slow) counts as a failed-auth strike for its address,
 *   so a slow-body flood is shed like a bad-credentials flood; the request timeout does not.
 * - Drops are made in two phases: every request the pass drops is first marked done
 *   (BodyWatch.cancel(): it can no longer be admitted), then each gives its budget back at once
 *   (BodyWatch.drop(), not when its close event runs later) and is ended. So the room a dropped
 *   request frees never goes to another request of the same pass (admitted, given a body buffer,
 *   then dropped: the audit of 2026-11-27 saw a mass expiry do that a thousand times in a row).
 *   A pass that drops nothing allocates nothing.
 * - The handler removes a watch when its body completes or its response closes: a watch left
 *   behind would be swept (and its connection destroyed) after the response.
 * - Each drop is logged (`request dropped`, with the reason's text) and told to `onDrop` by its
 *   timeout (public-server.ts counts it: ecapi_public_timeouts_total): on the drop path only.
 */
import { constants as h2, type Http2ServerRequest } from 'node:http2';
import type { IncomingMessage } from 'node:http';
import type { Logger } from '../observability/logger.js';
import type { PublicTimeout } from '../observability/service-metrics.js';
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
  /** The sweep is dropping it: done from now on, out of the set, never admitted; drop() follows. */
  cancel(): void;
  /** The budget given back (no answer will come). */
  drop(): void;
}

/** The deadlines the sweep enforces (one object per server). */
export interface BodySweepLimits {
  readonly requestTimeoutMs: number;
  readonly bodyIdleTimeoutMs: number;
  readonly minBodyBytesPerSecond: number;
}

/** Why the sweep drops a request: the timeout it is counted under (ecapi_public_timeouts_total). */
export type BodyDrop = Extract<PublicTimeout, 'request' | 'body_idle' | 'body_rate'>;

/** The reason as the `request dropped` log line writes it. */
const DROP_LOG_TEXT: Readonly<Record<BodyDrop, string>> = {
  request: 'request timeout',
  body_idle: 'body idle timeout',
  body_rate: 'body slower than the minimum rate',
};

/** Why `watch` is to be dropped at time `clock`, or null. */
function dropReason(watch: BodyWatch, clock: number, limits: BodySweepLimits): BodyDrop | null {
  const { requestTimeoutMs, bodyIdleTimeoutMs, minBodyBytesPerSecond } = limits;
  const req = watch.req;
  if ('stream' in req) {
    if (clock - watch.startedAt > requestTimeoutMs) return 'request';
    if (watch.paused) {
      // Waiting for the budget: the request's buffer and the stream's fill behind our pause, then the
      // stream's flow-control window runs out and the client is blocked: our pause.
      const stream = req.stream;
      const state = stream.state;
      if (state.remoteClose === 1) {
        watch.admitNow?.();
        return null;
      }
      const buffered = req.readableLength + stream.readableLength;
      if (buffered !== watch.buffered) {
        watch.buffered = buffered;
        watch.lastDataAt = clock;
        return null;
      }
      if (state.localWindowSize === 0 || clock - watch.lastDataAt <= bodyIdleTimeoutMs) return null;
      return 'body_idle';
    }
  } else if (watch.paused) {
    // HTTP/1.1: Node keeps reading the socket into the paused request until its buffer is full, so
    // the client's progress stays visible: a body that is whole by now is admitted (its bytes are
    // in memory anyway); one whose buffer is not full and has not grown for the idle timeout is a
    // stalled client, not our pause.
    if (req.complete) {
      watch.admitNow?.();
      return null;
    }
    if (req.readableLength !== watch.buffered) {
      watch.buffered = req.readableLength;
      watch.lastDataAt = clock;
      return null;
    }
    if (req.readableLength >= req.readableHighWaterMark || clock - watch.lastDataAt <= bodyIdleTimeoutMs) return null;
    return 'body_idle';
  }
  if (clock - watch.lastDataAt > bodyIdleTimeoutMs) return 'body_idle';
  if (
    watch.untrusted && watch.admittedAt > 0 && minBodyBytesPerSecond > 0 &&
    watch.bytes < ((clock - watch.admittedAt - bodyIdleTimeoutMs) / 1000) * minBodyBytesPerSecond
  ) return 'body_rate';
  return null;
}

/** One pass over the watched bodies at time `clock`: drops (and forgets) those past a deadline, each told to `onDrop`. */
export function sweepBodies(
  watched: Set<BodyWatch>, clock: number, limits: BodySweepLimits, logger: Logger, failedAuth: FailedAuthShedder,
  onDrop?: (reason: BodyDrop) => void,
): void {
  let dropped: BodyWatch[] | null = null;
  let reasons: BodyDrop[] | null = null;
  for (const watch of watched) {
    const reason = dropReason(watch, clock, limits);
    if (reason === null) continue;
    watch.cancel();
    (dropped ??= []).push(watch);
    (reasons ??= []).push(reason);
  }
  if (dropped === null) return;
  for (let i = 0; i < dropped.length; i++) {
    const watch = dropped[i]!;
    const reason = reasons![i]!;
    watch.drop();
    // The HTTP/1.1 request timeout is Node's own (no log line); these are ours.
    logger.info({ request_id: watch.requestId, dropped: DROP_LOG_TEXT[reason], body_bytes: watch.bytes, http: watch.req.httpVersion }, 'request dropped');
    onDrop?.(reason);
    if (reason !== 'request') failedAuth.recordFailure(watch.address, watch.keyId);
    if ('stream' in watch.req) {
      if (!watch.req.stream.destroyed) watch.req.stream.close(h2.NGHTTP2_CANCEL);
    } else {
      watch.req.socket.destroy();
    }
  }
}
