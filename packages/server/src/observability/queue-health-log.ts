/**
 * The queue's health changes in the log (issue 16, point 9). While the queue cannot commit (disk
 * full, database unreachable, a lock held elsewhere) every request is answered 500 and logged at
 * info level like any other request; an operator tailing errors saw nothing. This observer, put
 * between the queue and the metrics, logs each change of state once per serving process:
 *
 *   error  "queue storage failing: …"   on the first failed commit (with the storage error)
 *   info   "queue storage recovered"    on the first commit (or probe) that succeeds again,
 *                                       with how long it failed and how many requests got 500
 *
 * Once per change, not per failed request: a full disk under load would otherwise write an error
 * line per request, which on the same full disk makes things worse. The storage error is the
 * driver's message (`SQLITE_FULL: database or disk is full`, `ENOSPC: …`, a PostgreSQL error
 * text): it names files or conditions, never events, bodies or credentials.
 */
import type { QueueCommitObserver, QueueHealth } from '../queue/event-queue.js';
import type { Logger } from './logger.js';

export class QueueHealthLog implements QueueCommitObserver {
  #failingSince: number | null = null;
  #failedRequests = 0;

  constructor(
    private readonly inner: QueueCommitObserver,
    private readonly logger: Logger,
    private readonly storage: string,
    private readonly now: () => number = Date.now,
  ) {}

  onCommit(info: { readonly requests: number; readonly events: number; readonly durationMs: number }): void {
    this.inner.onCommit(info);
  }

  onFailure(info: { readonly requests: number; readonly events: number }): void {
    if (this.#failingSince !== null) this.#failedRequests += info.requests;
    this.inner.onFailure(info);
  }

  onHealth(health: QueueHealth): void {
    this.inner.onHealth(health);
    if (!health.writable && this.#failingSince === null) {
      this.#failingSince = this.now();
      this.#failedRequests = 0;
      this.logger.error(
        { storage: this.storage, queue_error: health.lastError },
        'queue storage failing: events are not stored and requests are answered 500 until it recovers',
      );
    } else if (health.writable && this.#failingSince !== null) {
      this.logger.info(
        { storage: this.storage, failing_ms: this.now() - this.#failingSince, failed_requests: this.#failedRequests },
        'queue storage recovered',
      );
      this.#failingSince = null;
    }
  }
}
