/**
 * What an embedded store does after deleting rows so that no old copy of them is left in its files:
 * the b-tree pages' unallocated space is zeroed (page-gap-scrub.ts), then the WAL, which keeps the
 * old page images, is copied back and cut to zero bytes (wal-truncation.ts). In that order: the
 * scrub's own commit leaves a frame in the WAL, which the truncation then empties.
 *
 * With `scrub: false`, the WAL only: what a retention round does between two scrubs
 * (old-copies-schedule.ts).
 *
 * Returns true once both are done; false when a reader or a writer kept either busy through its
 * attempts, or the scrub's whole-file sweep ran past its time (the caller tries again at a later
 * round and does not report the deletion done).
 */
import type Database from 'better-sqlite3';
import { scrubPageGaps } from './page-gap-scrub.js';
import { truncateWal } from './wal-truncation.js';

export async function clearOldCopies(
  db: Database.Database,
  options: { attempts?: number; busyMs?: number; pauseMs?: number; /** false: the WAL only (old-copies-schedule.ts) */ scrub?: boolean } = {},
): Promise<boolean> {
  if (options.scrub !== false && !(await scrubPageGaps(db.name, options)).complete) return false;
  return truncateWal(db, options);
}
