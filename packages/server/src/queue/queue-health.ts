/**
 * A queue's writability as readiness, metrics and the log see it, kept the same way by every
 * EventQueue: the observer hears each change once (the first failure, the first success after
 * failures), and while the queue is not writable a probe runs every PROBE_INTERVAL_MS so that
 * readiness comes back without waiting for a sender's request. What a probe is (an empty commit,
 * a locking read) is the backend's; when it runs is decided here.
 *
 * An idle probe too, where the backend asks for one (`idleProbeMs`, the PostgreSQL queue): a
 * database is another machine, and it can go away while no sender is sending. Without a probe,
 * readiness would say "ready" until the first request after the outage failed, so a load balancer
 * or an operator's alert would learn of it only from a sender's 500. While writable, a probe runs
 * when nothing (no commit, no probe) has shown the queue writable for `idleProbeMs`: under traffic
 * the commits are the probes, and an idle node asks the database once per interval. The embedded
 * queue has none: its file is on this machine's own disk, and a probe there would be a write.
 */
import type { QueueCommitObserver, QueueHealth } from './event-queue.js';

export const PROBE_INTERVAL_MS = 500;

/** How often an idle PostgreSQL queue checks that it can still commit (its default `idleProbeMs`). */
export const IDLE_PROBE_MS = 5_000;

export class QueueHealthState {
  readonly #observer: QueueCommitObserver | undefined;
  readonly #probe: () => void;
  #health: QueueHealth = { writable: true, lastError: null };
  #probeTimer: NodeJS.Timeout | null = null;
  #idleTimer: NodeJS.Timeout | null = null;
  /** When the queue was last shown writable (a commit or a probe), by performance.now(). */
  #lastWritableAt = performance.now();

  /**
   * `probe`: called every PROBE_INTERVAL_MS while not writable and, with `idleProbeMs`, when the
   * queue has not been shown writable for that long; it reports back through set().
   */
  constructor(observer: QueueCommitObserver | undefined, probe: () => void, options: { readonly idleProbeMs?: number } = {}) {
    this.#observer = observer;
    this.#probe = probe;
    if (options.idleProbeMs !== undefined) {
      const every = options.idleProbeMs;
      // Checked at half the interval, so a probe is at most 1.5 intervals after the last sign of life.
      this.#idleTimer = setInterval(() => {
        if (this.#health.writable && performance.now() - this.#lastWritableAt >= every) this.#probe();
      }, Math.max(1, every / 2));
      this.#idleTimer.unref();
    }
  }

  get current(): QueueHealth {
    return this.#health;
  }

  set(health: QueueHealth): void {
    if (health.writable) this.#lastWritableAt = performance.now();
    const changed = health.writable !== this.#health.writable;
    this.#health = health;
    if (!changed) return;
    this.#observer?.onHealth(health);
    if (!health.writable && !this.#probeTimer) {
      this.#probeTimer = setInterval(() => this.#probe(), PROBE_INTERVAL_MS);
      this.#probeTimer.unref();
    } else if (health.writable && this.#probeTimer) {
      clearInterval(this.#probeTimer);
      this.#probeTimer = null;
    }
  }

  /** Stops probing (on close). */
  stop(): void {
    if (this.#probeTimer) clearInterval(this.#probeTimer);
    this.#probeTimer = null;
    if (this.#idleTimer) clearInterval(this.#idleTimer);
    this.#idleTimer = null;
  }
}
