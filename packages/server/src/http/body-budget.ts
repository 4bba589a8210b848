/**
 * A per-process budget of request-body bytes in flight: what bounds ingest memory under load.
 *
 * A body is held from its first byte until its response is sent (after the durable commit). With
 * 50 connections each uploading an 850 KB batch, every body would otherwise be buffered at once,
 * interleaved, while the one thread that parses them works through them one at a time; glibc's
 * heap then grows to hold them all and keeps its size. Here a request whose body would take the
 * bytes in flight past the budget is not read until enough earlier requests have answered: its
 * bytes wait in the kernel's socket buffer, and TCP (or HTTP/2 flow control) slows the sender.
 * The server is busy either way, so throughput does not drop; only the queue of half-read bodies
 * in memory does.
 *
 * Rules:
 * - A request reserves its declared Content-Length, or CHUNKED_RESERVATION when it has none;
 *   a chunked body that grows past its reservation is counted as it grows but never paused midway
 *   (pausing a half-read body would hold its bytes, not free them).
 * - Requests are admitted in arrival order. A request is always admitted when nothing else is in
 *   flight, so a body larger than the budget still gets through.
 * - Every reservation is released exactly once, when the exchange closes, however it ends.
 */

/** What a body without Content-Length reserves up front. */
export const CHUNKED_RESERVATION = 64 * 1024;

/** Default budget: enough bodies in flight to keep parsing and group commit busy, few enough to bound memory. */
export const DEFAULT_BODY_BUDGET_BYTES = 16 * 1024 * 1024;

export interface BodyReservation {
  /** Counts bytes received beyond the reservation (chunked bodies). */
  grow(bytes: number): void;
  /** Gives the bytes back; later calls do nothing. */
  release(): void;
}

export class BodyBudget {
  readonly #limit: number;
  #inFlight = 0;
  readonly #waiting: { bytes: number; admit: (reservation: BodyReservation) => void }[] = [];

  constructor(limitBytes: number = DEFAULT_BODY_BUDGET_BYTES) {
    this.#limit = limitBytes;
  }

  /** Bytes reserved by requests in flight. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Requests waiting for room. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /**
   * Calls `admit` with a reservation now if there is room (and no one is waiting ahead), else as
   * soon as there is. Returns a function that withdraws a request still waiting (its client left).
   */
  reserve(bytes: number, admit: (reservation: BodyReservation) => void): () => void {
    const entry = { bytes, admit };
    if (this.#waiting.length === 0 && this.#fits(bytes)) {
      admit(this.#take(bytes));
      return () => {};
    }
    this.#waiting.push(entry);
    return () => {
      const at = this.#waiting.indexOf(entry);
      if (at >= 0) this.#waiting.splice(at, 1);
      this.#admitWaiting();
    };
  }

  #fits(bytes: number): boolean {
    return this.#inFlight === 0 || this.#inFlight + bytes <= this.#limit;
  }

  #take(bytes: number): BodyReservation {
    let held = bytes;
    this.#inFlight += held;
    return {
      grow: (more) => {
        if (held < 0) return;
        held += more;
        this.#inFlight += more;
      },
      release: () => {
        if (held < 0) return;
        this.#inFlight -= held;
        held = -1;
        this.#admitWaiting();
      },
    };
  }

  #admitWaiting(): void {
    while (this.#waiting.length > 0 && this.#fits(this.#waiting[0]!.bytes)) {
      const next = this.#waiting.shift()!;
      next.admit(this.#take(next.bytes));
    }
  }
}
