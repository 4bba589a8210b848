/**
 * One request's body, from its first byte to one Buffer, for public-server.ts (after the head
 * passed: head-refusal.ts). It is also the request's BodyWatch: the one object per request that the
 * sweep (body-sweep.ts) checks for stalls, so a request costs no timer and no second object.
 *
 * States, in order (each only forward):
 *   waiting   no body byte yet: nothing reserved (a head alone costs no budget);
 *   early     the first chunks are held while the budget (body-budget.ts) is asked for the
 *             declared length (CHUNKED_RESERVATION without one); with no room the request is paused
 *             (its bytes wait in the socket: TCP backpressure; HTTP/2: the stream's flow-control
 *             window is no longer refilled) until admitted, or until the sweep sees the body whole
 *             in memory and admits it at once (admitNow). An untrusted request that would wait
 *             when too many already do (the budget's caps, in all and per connection) is refused
 *             instead, one turn of the event loop later unless its body ended meanwhile (then it
 *             is admitted at once: a small body without Content-Length, usual on HTTP/2, would
 *             otherwise be refused for want of a length): HTTP/2 RST_STREAM REFUSED_STREAM (nothing
 *             was processed: the client may retry; the session lives on; told to
 *             ReaderHost.onStreamRefused, since no answer counts it); HTTP/1.1 onRefused
 *             answers it (the public server: 429 with Retry-After, counted like the other refusals
 *             before authentication, the connection closed after it since the rest of the body is
 *             unread), else the socket is destroyed. The budget counts them (BodyBudget.refused);
 *   admitted  chunks are kept: a declared length of at least PREALLOCATE_FROM goes straight into one
 *             buffer of its own (the socket's chunks die young, nothing holds the body twice, and the
 *             buffer can be transferred to the queue's writer without a copy); smaller or chunked
 *             bodies as a list, joined once;
 *   done      the body is whole (onBody, once), went over MAX_BODY_BYTES (onTooLarge, once), the
 *             request errored, was refused or dropped by the sweep (drop()), or the response
 *             closed. No chunk is looked at after it.
 *
 * Invariants:
 * - The reservation is released exactly once, in closed() (the response's close), however the
 *   exchange ends, or earlier in drop() (the sweep ended the request: no answer will come); a
 *   pending reservation is withdrawn there too.
 * - A body buffer is allocated only for a request admitted alive: one admitted after waiting whose
 *   stream or socket was closed meanwhile (the client left, the sweep cancelled it, its close event
 *   not run yet) gives its reservation back at once. A mass expiry of waiting requests used to
 *   admit each dead one in turn, allocating 1 MiB for each (audit of 2026-11-27).
 * - The watch leaves the sweep's set as soon as the body is done (a watch left behind would be
 *   swept after the response, and its connection destroyed).
 * - A chunked body is counted as it streams and refused the moment it passes MAX_BODY_BYTES; past
 *   its reservation it grows the reservation (never paused midway).
 * - Per chunk: a few field updates and, once admitted, one copy at most; no allocation while a
 *   preallocated body fills. The clock is the server's coarse one (ReaderHost.clock), refreshed by
 *   the sweep, never performance.now() per chunk.
 */
import { constants as h2, type Http2ServerRequest } from 'node:http2';
import type { IncomingMessage } from 'node:http';
import { MAX_BODY_BYTES } from '@ecapi-ingest/protocol';
import { CHUNKED_RESERVATION, type BodyBudget, type BodyReservation } from './body-budget.js';
import type { BodyWatch } from './body-sweep.js';

/** setImmediate's callback for a request the budget refused (no closure per refusal). */
function refuseUnlessWhole(reader: BodyReader): void {
  reader.refuseUnlessWhole();
}

/** Bodies declared at least this large are read into one preallocated buffer. */
const PREALLOCATE_FROM = 16 * 1024;
const EMPTY_BODY = Buffer.alloc(0);

/** What every reader of one server shares (one object per server). */
export interface ReaderHost {
  /** Coarse clock (performance.now() ms): the server's sweep refreshes it, readers only read it. */
  clock: number;
  readonly budget: BodyBudget;
  /** The bodies the sweep watches. */
  readonly watched: Set<BodyWatch>;
  /** An HTTP/2 request refused with RST_STREAM REFUSED_STREAM (the waiting caps): no answer, so no status to count it by. */
  readonly onStreamRefused?: () => void;
}

export class BodyReader implements BodyWatch {
  // The sweep's view (BodyWatch).
  readonly startedAt: number;
  lastDataAt: number;
  admittedAt = 0;
  bytes = 0;
  paused = false;
  buffered = 0;
  admitNow: (() => void) | null = null;

  /** Content-Length was given. */
  private readonly declared: boolean;
  /** Bytes asked of the budget: the declared length, or CHUNKED_RESERVATION. */
  private readonly reserved: number;
  private reservation: BodyReservation | null = null;
  /** Withdraws a reservation still waiting for room. */
  private withdraw: (() => void) | null = null;
  /** Chunks that came before the budget admitted the request (normally just the first). */
  private early: Buffer[] | null = null;
  /** The preallocated body (a declared length of at least PREALLOCATE_FROM). */
  private whole: Buffer | null = null;
  private chunks: Buffer[] | null = null;
  /** Bytes kept since admission. */
  private size = 0;
  private done = false;
  /** Waited for the budget (paused at least once): admission then checks the request is alive. */
  private waited = false;
  /** The request ended while its first chunks were held (complete once admitted). */
  private ended = false;
  private responseClosed = false;

  constructor(
    readonly req: IncomingMessage | Http2ServerRequest,
    readonly requestId: string,
    readonly address: string,
    readonly keyId: string | undefined,
    readonly untrusted: boolean,
    private readonly host: ReaderHost,
    /** The whole body (not called when the request ended early: HTTP/2 stream reset). */
    private readonly onBody: (body: Buffer) => void,
    /** The body passed MAX_BODY_BYTES: answer; reading has stopped and the request is paused. */
    private readonly onTooLarge: () => void,
    /**
     * HTTP/1.1 only: refused by the budget's waiting caps: answer (the public server: 429 with
     * Retry-After, the connection closed after it); reading has stopped. Absent: the socket is
     * destroyed. (HTTP/2 refusals are RST_STREAM REFUSED_STREAM: refuse().)
     */
    private readonly onRefused?: () => void,
  ) {
    this.startedAt = host.clock;
    this.lastDataAt = host.clock;
    const declared = req.headers['content-length'];
    const declaredBytes = Number(declared);
    this.declared = declared !== undefined;
    this.reserved = declared !== undefined && Number.isSafeInteger(declaredBytes) && declaredBytes >= 0 ? declaredBytes : CHUNKED_RESERVATION;
    host.watched.add(this);
    req.on('data', (chunk: Buffer) => this.data(chunk));
    req.on('error', () => this.stop());
    req.on('end', () => this.end());
  }

  /** The response closed, however the exchange ended: the reservation goes back to the budget. */
  closed(): void {
    this.responseClosed = true;
    this.drop();
  }

  /** The sweep is dropping the request: done from now on (never admitted, never answered). */
  cancel(): void {
    if (!this.done) {
      this.done = true;
      this.host.watched.delete(this);
    }
  }

  /**
   * The request will not be answered (the sweep is ending it, or the response closed): done, out
   * of the sweep's set, the held chunks let go, the budget given back. Idempotent.
   */
  drop(): void {
    this.cancel();
    this.early = null;
    this.admitNow = null;
    const withdraw = this.withdraw;
    this.withdraw = null;
    withdraw?.();
    this.reservation?.release();
  }

  private data(chunk: Buffer): void {
    if (this.done) return;
    this.bytes += chunk.length;
    this.lastDataAt = this.host.clock;
    if (this.reservation !== null) {
      this.take(chunk);
      return;
    }
    if (this.early !== null) {
      this.early.push(chunk);
      return;
    }
    this.early = [chunk];
    const budget = this.host.budget;
    // The whole body came with its first read (most single events): nothing left to hold back.
    if (this.declared && chunk.length >= this.reserved) {
      this.admitted(budget.admitNow(this.reserved, !this.untrusted));
      return;
    }
    const req = this.req;
    const isH2 = 'stream' in req;
    // Untrusted: the connection whose waiting requests are capped (the HTTP/2 session, the socket).
    const connection = this.untrusted ? (isH2 ? req.stream.session : req.socket) ?? undefined : undefined;
    const withdraw = budget.reserve(this.reserved, (granted) => this.admitted(granted), !this.untrusted, connection);
    if (withdraw === null) {
      // Too many wait already. A body that ends within this turn (a small one without
      // Content-Length, which HTTP/2 clients often omit) is in memory anyway: admitted, not refused.
      setImmediate(refuseUnlessWhole, this);
      return;
    }
    this.withdraw = withdraw;
    if (this.reservation === null) {
      this.paused = true;
      this.waited = true;
      // What Node holds behind the pause: the sweep watches it grow (body-sweep.ts).
      this.buffered = req.readableLength + (isH2 ? req.stream.readableLength : 0);
      this.admitNow = () => {
        this.withdraw?.();
        this.withdraw = null;
        if (this.reservation === null) this.admitted(budget.admitNow(this.reserved, !this.untrusted));
      };
      this.req.pause();
    }
  }

  private end(): void {
    if (this.done) return;
    if (this.early !== null) this.ended = true;
    else this.complete();
  }

  private stop(): void {
    this.done = true;
    this.host.watched.delete(this);
    this.req.removeAllListeners('data');
  }

  /** Refused by the budget one turn ago: admitted if its body ended meanwhile, else refused. */
  refuseUnlessWhole(): void {
    if (this.done || this.reservation !== null) return;
    if (this.ended) this.admitted(this.host.budget.admitNow(this.reserved, !this.untrusted));
    else this.refuse();
  }

  /**
   * Too many untrusted requests wait already (body-budget.ts): this one is ended at once, unread.
   * HTTP/2: RST_STREAM REFUSED_STREAM, the protocol's own "not processed, retry" (an answer would
   * need the client to read it on a stream whose body it is still sending). HTTP/1.1: onRefused
   * answers (the connection closes after it), else the socket is destroyed.
   */
  private refuse(): void {
    this.stop();
    this.early = null;
    const req = this.req;
    if ('stream' in req) {
      if (!req.stream.destroyed) {
        req.stream.close(h2.NGHTTP2_REFUSED_STREAM);
        this.host.onStreamRefused?.();
      }
    } else if (this.onRefused !== undefined) {
      this.onRefused();
    } else {
      req.socket?.destroy();
    }
  }

  /** The stream (HTTP/2) or socket (HTTP/1.1) can still carry an answer. */
  private alive(): boolean {
    const req = this.req;
    if ('stream' in req) return !req.stream.closed && !req.stream.destroyed;
    // Not req.destroyed: an HTTP/1.1 request may be destroyed once its body ended, its socket alive.
    const socket = req.socket as IncomingMessage['socket'] | null;
    return socket !== null && !socket.destroyed;
  }

  private admitted(granted: BodyReservation): void {
    this.reservation = granted;
    // After a wait the stream may have died meanwhile (its close event not run yet): no buffer for it.
    if (this.responseClosed || this.done || (this.waited && !this.alive())) {
      this.drop();
      return;
    }
    const wasPaused = this.paused;
    this.paused = false;
    this.admittedAt = this.host.clock;
    this.lastDataAt = this.host.clock;
    if (this.reserved >= PREALLOCATE_FROM && this.declared) this.whole = Buffer.allocUnsafeSlow(this.reserved);
    const first = this.early!;
    this.early = null;
    for (const chunk of first) if (!this.take(chunk)) return;
    if (this.ended) this.complete();
    else if (wasPaused) this.req.resume();
  }

  /** Keeps one chunk of an admitted body; false when the body went over the limit (answered). */
  private take(chunk: Buffer): boolean {
    const size = (this.size += chunk.length);
    if (size > MAX_BODY_BYTES) {
      this.stop();
      this.req.pause();
      this.onTooLarge();
      return false;
    }
    if (size > this.reserved) this.reservation!.grow(Math.min(chunk.length, size - this.reserved));
    const whole = this.whole;
    if (whole !== null && size <= whole.length) {
      chunk.copy(whole, size - chunk.length);
      return true;
    }
    if (whole !== null) {
      // More than Content-Length said (HTTP/1.1's parser never allows it): keep what came as chunks.
      this.chunks = [whole.subarray(0, size - chunk.length)];
      this.whole = null;
    }
    if (this.chunks === null) this.chunks = [chunk];
    else this.chunks.push(chunk);
    return true;
  }

  private complete(): void {
    if (this.done) return;
    this.stop();
    // HTTP/2: a stream reset or a lost connection ends the request too, with a truncated body.
    const req = this.req;
    if ('stream' in req && req.stream.destroyed) return;
    const chunks = this.chunks;
    const body = this.whole !== null ? this.whole.subarray(0, this.size) : chunks === null ? EMPTY_BODY : chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, this.size);
    this.onBody(body);
  }
}
