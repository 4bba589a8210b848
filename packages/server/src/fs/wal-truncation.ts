/**
 * Truncating a SQLite WAL after a deletion (issue 29): a WAL keeps the page images of every commit
 * until it starts over, so the pages a deletion changed are still there in their old form (the
 * record in clear) until a checkpoint has copied the WAL back AND the WAL was cut to zero bytes.
 * `wal_checkpoint(TRUNCATE)` does both, but it must wait until no reader still uses an older
 * snapshot, and while it waits it holds off new writers (SQLite: "blocks new database writers while
 * pending"). So each attempt waits at most `busyMs` (the queue's ingest writer polls the lock and
 * goes on afterwards), and the caller retries, yielding the event loop in between.
 *
 * Returns true once an attempt checkpointed the whole WAL and truncated it.
 */
import type Database from 'better-sqlite3';

interface CheckpointResult {
  busy: number;
  log: number;
  checkpointed: number;
}

export async function truncateWal(db: Database.Database, options: { attempts?: number; busyMs?: number; pauseMs?: number } = {}): Promise<boolean> {
  const attempts = options.attempts ?? 40;
  const previous = db.pragma('busy_timeout', { simple: true }) as number;
  try {
    db.pragma(`busy_timeout = ${options.busyMs ?? 250}`);
    for (let i = 0; i < attempts; i++) {
      try {
        const [r] = db.pragma('wal_checkpoint(TRUNCATE)') as CheckpointResult[];
        if (r && r.busy === 0) return true;
      } catch {
        // SQLITE_BUSY/LOCKED: another checkpoint or a long reader; try again
      }
      await new Promise((resolve) => setTimeout(resolve, options.pauseMs ?? 50));
    }
    return false;
  } finally {
    db.pragma(`busy_timeout = ${previous}`);
  }
}

/**
 * A PASSIVE checkpoint (never waits): copies what it can so the WAL starts over soon. Returns true
 * when it copied every frame back (no reader holds an older snapshot), false when it could not (a
 * reader, or SQLITE_BUSY: another checkpoint; the next one does it).
 */
export function checkpointPassive(db: Database.Database): boolean {
  try {
    const [r] = db.pragma('wal_checkpoint(PASSIVE)') as CheckpointResult[];
    return r !== undefined && r.busy === 0 && r.checkpointed === r.log;
  } catch {
    return false;
  }
}
