/**
 * A dependency that fails on every try while it is away (the database of the rate limiter's leases,
 * the control plane's poll, the ingest-stats flush) is said once per change, not once per try: the
 * first failure, then the first success after it. Under load in an outage a line per try is a line
 * per request or per second per process, which buries what changed (the queue's health log does the
 * same for the queue: observability/queue-health-log.ts).
 */
export class FailureLatch {
  readonly #onFailed: (error: Error) => void;
  readonly #onRecovered: () => void;
  #failing = false;

  constructor(onFailed: (error: Error) => void, onRecovered: () => void = () => undefined) {
    this.#onFailed = onFailed;
    this.#onRecovered = onRecovered;
  }

  /** True from a failure until the next success. */
  get failing(): boolean {
    return this.#failing;
  }

  failed(error: Error): void {
    if (this.#failing) return;
    this.#failing = true;
    this.#onFailed(error);
  }

  succeeded(): void {
    if (!this.#failing) return;
    this.#failing = false;
    this.#onRecovered();
  }
}
