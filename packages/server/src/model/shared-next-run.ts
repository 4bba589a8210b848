/**
 * An asynchronous read that callers share, on one condition: the run a caller gets starts after its
 * call. One run at a time; the callers that arrive while one runs (or waits to start) share the next
 * one, which starts when the current one ends. So each caller sees the state as it was at some
 * moment after its call (what "read after taking the lock" or "read the requests recorded before
 * this call" arguments need), and a burst of callers costs at most two runs in a row, never one each.
 * Handing a caller the run already in flight would break that: it may have read before the call.
 *
 * Used by the PostgreSQL consumer's suppression list (lifecycle/postgres-lifecycle-store.ts, called
 * by every lane before every batch) and the console's deletion follower (live/console-deletions.ts,
 * called every second and before every read of the console's entries). A failed run rejects the
 * callers that shared it; the next run starts as usual.
 */
export class SharedNextRun {
  readonly #run: () => Promise<void>;
  #chain: Promise<void> = Promise.resolve();
  #next: Promise<void> | null = null;

  constructor(run: () => Promise<void>) {
    this.#run = run;
  }

  /** A run that starts after this call: the next one, shared with the other callers waiting for it. */
  run(): Promise<void> {
    if (this.#next) return this.#next;
    const next = this.#chain.then(() => {
      this.#next = null;
      return this.#run();
    });
    this.#next = next;
    this.#chain = next.catch(() => undefined);
    return next;
  }

  /** Resolves (never rejects) once every run asked for so far has ended. */
  settled(): Promise<void> {
    return this.#chain;
  }
}
