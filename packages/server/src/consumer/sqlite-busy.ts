/**
 * SQLite's "database is locked" (SQLITE_BUSY) while a process opens and prepares its stores, and
 * waiting it out.
 *
 * A connection waits for a lock another connection holds up to its busy_timeout (5 s on every file
 * here), then fails with SQLITE_BUSY; in a few cases it fails at once, without waiting. At the
 * worker's start that is transient, not a fault, and it can outlast 5 s on a loaded machine:
 * - after a SIGKILL, the first connection to a view file rebuilds its wal-index from the WAL (up to
 *   256 MB per file: consumer/DESIGN.md "Durability settings"), and the last connection to close a
 *   file checkpoints its whole WAL; both hold the file against every other connection meanwhile;
 * - another connection holds a view file's write lock (an eraser's TRUNCATE checkpoint,
 *   fs/wal-truncation.ts; another process recording the view's layout) when the worker must write
 *   it (the layout, sqlite-view-layout.ts);
 * - two connections switching one brand-new file to WAL at the same moment: one fails at once
 *   (SQLite upgrades its read to a write, and an upgrade never waits).
 * The worker used to exit then ("error: database is locked"): `serve` restarted it after a backoff,
 * a standalone worker stayed down. Now its start runs again after a bounded backoff, with a
 * warning at the first failure and again every minute while it lasts, until it succeeds or the
 * worker is stopped. The 5 s busy_timeout is unchanged for normal
 * operation: a batch that meets it fails and its lane retries it (consumer/consumer-loop.ts).
 */
import type { Logger } from '../observability/logger.js';

/** The warning logged (once per start) when the start meets a lock; tests look for it. */
export const BUSY_RETRY_MESSAGE = 'a SQLite file is locked by another connection while the consumer starts; retrying';

/** First and longest pause between attempts (doubling in between). */
export const BUSY_RETRY_FIRST_MS = 250;
export const BUSY_RETRY_MAX_MS = 5000;
/** While it keeps failing, the warning is said again this often (with the tries so far). */
export const STILL_RETRYING_EVERY_MS = 60_000;

/** SQLITE_BUSY and its extended codes (SQLITE_BUSY_RECOVERY, _SNAPSHOT, _TIMEOUT), as better-sqlite3 reports them. */
export function isSqliteBusy(error: unknown): boolean {
  const code = (error as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' && (code === 'SQLITE_BUSY' || code.startsWith('SQLITE_BUSY_'));
}

/**
 * Runs `attempt` until it does not fail with SQLITE_BUSY; any other error is thrown. `attempt`
 * must leave nothing open when it fails. Resolves with undefined when `stopped` resolves first.
 * `step` names what was being done, for the log (a fixed phrase: never a path or an identifier).
 * `alsoWaitOut`: other errors to wait out the same way, each with the warning to say once (the
 * worker's PostgreSQL database unreachable at its start: postgres/database-unreachable.ts).
 */
export async function retryWhileBusy<T>(
  attempt: () => T | Promise<T>,
  options: {
    readonly logger: Logger;
    readonly stopped: Promise<void>;
    readonly step: string;
    readonly alsoWaitOut?: { readonly matches: (error: unknown) => boolean; readonly message: string };
    /** How often the warning is said again while it keeps failing (default STILL_RETRYING_EVERY_MS). */
    readonly remindMs?: number;
  },
): Promise<T | undefined> {
  let stopped = false;
  void options.stopped.then(() => (stopped = true));
  let delay = BUSY_RETRY_FIRST_MS;
  const remindMs = options.remindMs ?? STILL_RETRYING_EVERY_MS;
  /** When the warning was last said (none yet: -Infinity), and the failed tries so far. */
  let warnedAt = Number.NEGATIVE_INFINITY;
  let tries = 0;
  for (;;) {
    if (stopped) return undefined;
    try {
      return await attempt();
    } catch (error) {
      const busy = isSqliteBusy(error);
      if (!busy && !options.alsoWaitOut?.matches(error)) throw error;
      tries++;
      // Once, then again every remindMs while it lasts: a start that never succeeds (a port that
      // is not PostgreSQL's answers like an outage) is never silent for long.
      const now = Date.now();
      if (now - warnedAt >= remindMs) {
        warnedAt = now;
        const code = (error as { code?: unknown }).code;
        options.logger.warn(
          { step: options.step, err: { code: typeof code === 'string' ? code : undefined, message: (error as Error).message }, retry_in_ms: delay, tries },
          busy ? BUSY_RETRY_MESSAGE : options.alsoWaitOut!.message,
        );
      }
    }
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([options.stopped, new Promise((resolve) => (timer = setTimeout(resolve, delay)))]);
    clearTimeout(timer);
    delay = Math.min(BUSY_RETRY_MAX_MS, delay * 2);
  }
}
