/**
 * A queue's writability as readiness, metrics and the log see it, kept the same way by every
 * EventQueue: the observer hears each change once (the first failure, the first success after
 * failures), and while the queue is not writable a probe runs every PROBE_INTERVAL_MS so that
 * readiness comes back without waiting for a sender's request. What a probe is (an empty commit,
 * a locking read) is the backend's; when it runs is decided here.
 */
import type { QueueCommitObserver, QueueHealth } from './event-queue.js';

export const PROBE_INTERVAL_MS = 500;

export class QueueHealthState {
  readonly #observer: QueueCommitObserver | undefined;
  readonly #probe: () => void;
  #health: QueueHealth = { writable: true, lastError: null };
  #probeTimer: NodeJS.Timeout | null = null;

  /** `probe`: called every PROBE_INTERVAL_MS while not writable; it reports back through set(). */
  constructor(observer: QueueCommitObserver | undefined, probe: () => void) {
    this.#observer = observer;
    this.#probe = probe;
  }

  get current(): QueueHealth {
    return this.#health;
  }

  set(health: QueueHealth): void {
    const changed = health.writable !== this.#health.writable;
    this.#health = health;
    if (!changed) return;
    this.#observer?.onHealth(health);
    if (!health.writable && !this.#probeTimer) {
      this.#probeTimer = setInterval(() => this.#probe(), PROBE_INTERVAL_MS);
      this.#probeTimer.unref();
    } else if (health.writable) {
      this.stop();
    }
  }

  /** Stops probing (on close). */
  stop(): void {
    if (this.#probeTimer) clearInterval(this.#probeTimer);
    this.#probeTimer = null;
  }
}
