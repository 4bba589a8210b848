/**
 * A per-process budget of request-body bytes in flight: what bounds ingest memory under load.
 *
 * A body is held from its first byte until its response is sent (after the durable commit). With
 * 50 connections each uploading an 850 KB batch, every body would otherwise be buffered at once,
 * interleaved, while the one thread that parses them works through them one at a time; glibc's
 * heap then grows to hold them all and keeps its size. Here a request whose body would take the
 * bytes in flight past the budget is not read beyond its first chunk (one socket read, at most
 * 64 KiB, which Node had buffered anyway) until enough earlier requests have answered: the rest
 * waits in the kernel's socket buffer, and TCP (or HTTP/2 flow control) slows the sender.
 * The server is busy either way, so throughput does not drop; only the queue of half-read bodies
 * in memory does.
 *
 * Rules:
 * - A request reserves its declared Content-Length, or CHUNKED_RESERVATION when it has none, when
 *   the first bytes of its body arrive (http/body-reader.ts): a request that sends only its head
 *   reserves nothing, however large the length it declares (issue 16: 40 such requests used to
 *   hold the whole budget and stall every sender for 30 s). A chunked body that grows past its
 *   reservation is counted as it grows but never paused midway (pausing a half-read body would
 *   hold its bytes, not free them).
 * - Trusted and untrusted requests. A request on a connection that has already had a request
 *   authenticated (a valid HMAC: its sender holds a secret) is trusted. Any other request (a new
 *   connection, or one that never authenticated) is untrusted: its sender may not hold a secret,
 *   and the HMAC can only be checked once the whole body is in. Untrusted requests together hold at
 *   most `untrustedShare` of the budget (a quarter by default), so bodies that stall or crawl
 *   without credentials can never take the room authenticated senders need; the public server's
 *   body idle timeout and minimum rate bound how long they hold even that.
 * - A body that is already whole in memory when it would wait (it came with its first read, or
 *   arrived while it waited: the sweep sees it, body-sweep.ts) is counted and admitted at once
 *   (admitNow): its bytes are held either way. Only reading more is what waiting saves; most single events never wait.
 * - Requests are admitted in arrival order within their class, trusted ones first. A request is
 *   always admitted when nothing else (of its class) is in flight, so a body larger than the
 *   budget still gets through.
 * - Every reservation is released exactly once, when the exchange closes, however it ends.
 *
 * Waiting untrusted requests are capped (audit of 2026-11-27: uncapped, 8 HTTP/2 sessions of 256
 * streams held 407 MB for the 30 s request timeout). A waiting request is not free: besides its
 * objects it holds what it sent before we stopped reading: on HTTP/2 up to ~192 KiB a stream
 * (measured: Node fills the request's and the stream's 64 KiB buffers, and the stream's 64 KiB
 * flow-control window is already granted; pause stops the window from being refilled, nothing
 * less), on HTTP/1.1 ~112 KiB (one socket read and the request's buffer).
 * So at most `maxUntrustedWaiting` untrusted requests wait in all (128 by default: ≤ 24 MiB on
 * HTTP/2, 14 MiB on HTTP/1.1; a fleet of senders opening 100 connections at once still waits
 * rather than being refused) and at
 * most `maxUntrustedWaitingPerConnection` (8) from one connection (an HTTP/1.1 socket or an HTTP/2
 * session, so that one session cannot take every place); reserve() refuses any more at once
 * (returns null: the reader refuses the request, body-reader.ts): the newcomer is refused, the
 * requests already waiting keep their place. Trusted requests are never refused (their senders hold a
 * secret); waiting bytes are not counted against the share (the caps bound them), only admitted
 * ones are.
 *
 * Costs: the queues are linked lists, so a request leaving the queue (its client left, or the
 * sweep dropped it) costs O(1), however many wait: with arrays, indexOf + splice made a mass expiry
 * of n waiters O(n^2) and stalled the event loop for seconds. Admission is one loop, never
 * recursive: an admitted request that releases at once (its stream died meanwhile: body-reader.ts)
 * does not start a nested admission, so a thousand dead waiters cost a thousand steps, not a
 * thousand stack frames. The trusted path with room (reserve or admitNow) allocates nothing but
 * its reservation.
 */

/** What a body without Content-Length reserves up front. */
export const CHUNKED_RESERVATION = 64 * 1024;

/** Default budget: enough bodies in flight to keep parsing and group commit busy, few enough to bound memory. */
export const DEFAULT_BODY_BUDGET_BYTES = 16 * 1024 * 1024;

/** Share of the budget that untrusted requests may hold together. */
export const DEFAULT_UNTRUSTED_SHARE = 0.25;

/** Untrusted requests that may wait for room at once, in all (each holds up to ~190 KiB on HTTP/2). */
export const DEFAULT_MAX_UNTRUSTED_WAITING = 128;

/** Untrusted requests that may wait for room at once on one connection (HTTP/1.1 socket, HTTP/2 session). */
export const DEFAULT_MAX_UNTRUSTED_WAITING_PER_CONNECTION = 8;

export interface BodyReservation {
  /** Counts bytes received beyond the reservation (chunked bodies). */
  grow(bytes: number): void;
  /** Gives the bytes back; later calls do nothing. */
  release(): void;
}

export interface WaitingCaps {
  /** Untrusted requests waiting at once, in all. */
  readonly maxUntrustedWaiting: number;
  /** Untrusted requests waiting at once on one connection. */
  readonly maxUntrustedWaitingPerConnection: number;
}

/** A request waiting for room: a node of its class's queue (a doubly linked list). */
interface Waiter {
  readonly bytes: number;
  readonly trusted: boolean;
  readonly admit: (reservation: BodyReservation) => void;
  /** Untrusted: the connection it counts against (undefined: none known). */
  readonly connection: object | undefined;
  prev: Waiter | null;
  next: Waiter | null;
  /** Still in its queue (false once admitted or withdrawn). */
  queued: boolean;
}

class WaitQueue {
  head: Waiter | null = null;
  tail: Waiter | null = null;
  length = 0;

  push(entry: Waiter): void {
    entry.prev = this.tail;
    if (this.tail === null) this.head = entry;
    else this.tail.next = entry;
    this.tail = entry;
    this.length++;
  }

  remove(entry: Waiter): void {
    if (entry.prev === null) this.head = entry.next;
    else entry.prev.next = entry.next;
    if (entry.next === null) this.tail = entry.prev;
    else entry.next.prev = entry.prev;
    entry.prev = entry.next = null;
    entry.queued = false;
    this.length--;
  }
}

const NOTHING_TO_WITHDRAW = (): void => {};

export class BodyBudget {
  readonly #limit: number;
  readonly #untrustedLimit: number;
  readonly #maxUntrustedWaiting: number;
  readonly #maxPerConnection: number;
  #inFlight = 0;
  #untrustedInFlight = 0;
  readonly #waiting = new WaitQueue();
  readonly #untrustedWaiting = new WaitQueue();
  /** Untrusted requests waiting, per connection (an entry leaves at 0). */
  readonly #waitingPerConnection = new Map<object, number>();
  #refused = 0;
  /** #admitWaiting() is running (a release inside an admission must not start another). */
  #admitting = false;

  constructor(
    limitBytes: number = DEFAULT_BODY_BUDGET_BYTES,
    untrustedShare: number = DEFAULT_UNTRUSTED_SHARE,
    caps: Partial<WaitingCaps> = {},
  ) {
    this.#limit = limitBytes;
    this.#untrustedLimit = Math.max(1, Math.floor(limitBytes * untrustedShare));
    this.#maxUntrustedWaiting = caps.maxUntrustedWaiting ?? DEFAULT_MAX_UNTRUSTED_WAITING;
    this.#maxPerConnection = caps.maxUntrustedWaitingPerConnection ?? DEFAULT_MAX_UNTRUSTED_WAITING_PER_CONNECTION;
  }

  /** Bytes reserved by requests in flight. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Bytes reserved by untrusted requests in flight (at most the untrusted share, or one request). */
  get untrustedInFlight(): number {
    return this.#untrustedInFlight;
  }

  /** Requests waiting for room. */
  get waiting(): number {
    return this.#waiting.length + this.#untrustedWaiting.length;
  }

  /** Untrusted requests waiting for room (at most maxUntrustedWaiting). */
  get untrustedWaiting(): number {
    return this.#untrustedWaiting.length;
  }

  /** Untrusted requests refused since the start because too many were waiting. */
  get refused(): number {
    return this.#refused;
  }

  /**
   * Calls `admit` with a reservation now if there is room (and no one of its class is waiting
   * ahead), else as soon as there is. Returns a function that withdraws a request still waiting
   * (its client left; O(1)), or null when an untrusted request would have to wait and the waiting
   * caps are reached (in all, or for `connection`): it is refused, `admit` is never called.
   */
  reserve(bytes: number, admit: (reservation: BodyReservation) => void, trusted = true, connection?: object): (() => void) | null {
    const queue = trusted ? this.#waiting : this.#untrustedWaiting;
    if (queue.length === 0 && (trusted || this.#waiting.length === 0) && this.#fits(bytes, trusted)) {
      admit(this.#take(bytes, trusted));
      return NOTHING_TO_WITHDRAW;
    }
    let onConnection = 0;
    if (!trusted) {
      if (connection !== undefined) onConnection = this.#waitingPerConnection.get(connection) ?? 0;
      if (queue.length >= this.#maxUntrustedWaiting || onConnection >= this.#maxPerConnection) {
        this.#refused++;
        return null;
      }
      if (connection !== undefined) this.#waitingPerConnection.set(connection, onConnection + 1);
    }
    const entry: Waiter = { bytes, trusted, admit, connection: trusted ? undefined : connection, prev: null, next: null, queued: true };
    queue.push(entry);
    return () => {
      if (!entry.queued) return;
      this.#dequeue(entry);
      // Only a head (or the last trusted waiter) held others back; for any other this finds nothing to admit.
      this.#admitWaiting();
    };
  }

  /**
   * Counts bytes that are already in memory (a body that arrived whole with its first read): they
   * are held whether or not they wait, so they never wait; waiting would only delay their answer.
   */
  admitNow(bytes: number, trusted = true): BodyReservation {
    return this.#take(bytes, trusted);
  }

  #dequeue(entry: Waiter): void {
    (entry.trusted ? this.#waiting : this.#untrustedWaiting).remove(entry);
    const connection = entry.connection;
    if (connection === undefined) return;
    const left = (this.#waitingPerConnection.get(connection) ?? 1) - 1;
    if (left > 0) this.#waitingPerConnection.set(connection, left);
    else this.#waitingPerConnection.delete(connection);
  }

  #fits(bytes: number, trusted: boolean): boolean {
    if (!trusted && this.#untrustedInFlight > 0 && this.#untrustedInFlight + bytes > this.#untrustedLimit) return false;
    return this.#inFlight === 0 || this.#inFlight + bytes <= this.#limit;
  }

  #take(bytes: number, trusted: boolean): BodyReservation {
    let held = bytes;
    this.#inFlight += held;
    if (!trusted) this.#untrustedInFlight += held;
    return {
      grow: (more) => {
        if (held < 0) return;
        held += more;
        this.#inFlight += more;
        if (!trusted) this.#untrustedInFlight += more;
      },
      release: () => {
        if (held < 0) return;
        this.#inFlight -= held;
        if (!trusted) this.#untrustedInFlight -= held;
        held = -1;
        this.#admitWaiting();
      },
    };
  }

  /**
   * Admits waiting requests while the head of a queue fits: trusted ones first, untrusted ones only
   * when no trusted one waits. One loop: a call made while it runs (an admitted request released at
   * once) returns, and the loop looks at the heads again after every admission.
   */
  #admitWaiting(): void {
    if (this.#admitting) return;
    this.#admitting = true;
    try {
      for (;;) {
        let next = this.#waiting.head;
        if (next === null) {
          next = this.#untrustedWaiting.head;
          if (next === null || !this.#fits(next.bytes, false)) return;
        } else if (!this.#fits(next.bytes, true)) return;
        this.#dequeue(next);
        next.admit(this.#take(next.bytes, next.trusted));
      }
    } finally {
      this.#admitting = false;
    }
  }
}
