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
 * - A body that is already whole in memory when it would wait (it came with its first read, or,
 *   on HTTP/1.1, arrived while it waited) is counted and admitted at once (admitNow): its bytes are
 *   held either way. Only reading more is what waiting saves; most single events never wait.
 * - Requests are admitted in arrival order within their class, trusted ones first. A request is
 *   always admitted when nothing else (of its class) is in flight, so a body larger than the
 *   budget still gets through.
 * - Every reservation is released exactly once, when the exchange closes, however it ends.
 */

/** What a body without Content-Length reserves up front. */
export const CHUNKED_RESERVATION = 64 * 1024;

/** Default budget: enough bodies in flight to keep parsing and group commit busy, few enough to bound memory. */
export const DEFAULT_BODY_BUDGET_BYTES = 16 * 1024 * 1024;

/** Share of the budget that untrusted requests may hold together. */
export const DEFAULT_UNTRUSTED_SHARE = 0.25;

export interface BodyReservation {
  /** Counts bytes received beyond the reservation (chunked bodies). */
  grow(bytes: number): void;
  /** Gives the bytes back; later calls do nothing. */
  release(): void;
}

interface Waiter {
  readonly bytes: number;
  readonly trusted: boolean;
  readonly admit: (reservation: BodyReservation) => void;
}

export class BodyBudget {
  readonly #limit: number;
  readonly #untrustedLimit: number;
  #inFlight = 0;
  #untrustedInFlight = 0;
  readonly #waiting: Waiter[] = [];
  readonly #untrustedWaiting: Waiter[] = [];

  constructor(limitBytes: number = DEFAULT_BODY_BUDGET_BYTES, untrustedShare: number = DEFAULT_UNTRUSTED_SHARE) {
    this.#limit = limitBytes;
    this.#untrustedLimit = Math.max(1, Math.floor(limitBytes * untrustedShare));
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

  /**
   * Calls `admit` with a reservation now if there is room (and no one of its class is waiting
   * ahead), else as soon as there is. Returns a function that withdraws a request still waiting
   * (its client left).
   */
  reserve(bytes: number, admit: (reservation: BodyReservation) => void, trusted = true): () => void {
    const queue = trusted ? this.#waiting : this.#untrustedWaiting;
    if (queue.length === 0 && (trusted || this.#waiting.length === 0) && this.#fits(bytes, trusted)) {
      admit(this.#take(bytes, trusted));
      return () => {};
    }
    const entry: Waiter = { bytes, trusted, admit };
    queue.push(entry);
    return () => {
      const at = queue.indexOf(entry);
      if (at >= 0) queue.splice(at, 1);
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

  #admitWaiting(): void {
    while (this.#waiting.length > 0 && this.#fits(this.#waiting[0]!.bytes, true)) {
      const next = this.#waiting.shift()!;
      next.admit(this.#take(next.bytes, true));
    }
    while (this.#waiting.length === 0 && this.#untrustedWaiting.length > 0 && this.#fits(this.#untrustedWaiting[0]!.bytes, false)) {
      const next = this.#untrustedWaiting.shift()!;
      next.admit(this.#take(next.bytes, false));
    }
  }
}
