/**
 * Zeroing what SQLite leaves of moved cells in its b-tree pages: the last place an erased record
 * could stay in an embedded file once its rows are deleted (docs/SECURITY.md, "Deleted data on disk").
 *
 * Why it is needed: `secure_delete` zeroes a deleted cell and a freed page, but when SQLite rebuilds
 * a page (a split or merge: btree.c `rebuildPage`) it writes the page's cells back from the end and
 * leaves the space between the cell pointer array and the new cell content area as it was: old
 * copies of cells, including cells that now live elsewhere. Deleting such a cell later zeroes it
 * where it lives now, not the old copy. That space is unallocated: SQLite never reads it, and takes
 * from its top when it needs room (`allocateSpace`), so zeroing it changes no row.
 *
 * How: a connection of its own, per chunk of pages:
 * 1. `wal_checkpoint(TRUNCATE)`, then `BEGIN IMMEDIATE`, and the WAL must still be zero bytes long.
 *    With the write lock held and no frame in the WAL, the main file holds the newest image of every
 *    page and nothing can change it: a checkpoint only copies frames, and no writer can add one.
 *    Otherwise (a commit slipped in between) the attempt is rolled back and made again.
 * 2. Each b-tree page of the chunk is read from the file; where its unallocated space is not all
 *    zeros, those bytes (and only those) are overwritten with zeros and the file is fdatasync'ed.
 * 3. A commit of the same `user_version`: it changes the WAL header, so every other connection (the
 *    consumer's, the eraser's, other processes') drops its page cache at its next transaction
 *    instead of writing back a cached page image with the old bytes in it. Page 1, which that commit
 *    rewrites from this connection's cache, is not scrubbed: it is the schema table's root and only
 *    ever held schema rows.
 * The lock is held for one chunk (CHUNK_PAGES: a read of 8 MiB), then let go for CHUNK_PAUSE_MS: a
 * writer waiting in SQLite's busy handler sleeps up to 100 ms between tries, so a scrub that took
 * the lock back at once would starve it through the whole pass (measured: a writer thread's commit
 * waited 534 ms for a 0.7 s pass); with the pause it gets in between two chunks.
 *
 * Invariants and hazards:
 * - Only b-tree pages are touched, told apart by their type byte (2, 5, 10, 13) with a consistent
 *   header. Overflow and freelist trunk pages begin with a page number, whose first byte is 0 or 1 in
 *   a file of fewer than 2^25 pages; a larger file, a pointer-map page (auto_vacuum) or a journal
 *   mode other than WAL is refused (ScrubRefusedError), never guessed at. A free page that looks like
 *   a b-tree page holds nothing any row uses, so zeroing part of it is harmless too.
 * - A residue never moves to another page: only cells are copied between pages, and a page comes
 *   from the freelist (zeroed when freed) or the end of the file. So a page scrubbed once after a
 *   deletion stays free of the deleted bytes whatever the consumer does between chunks, and a page
 *   not scrubbed yet is scrubbed in its turn.
 * - The pass ends at the page count the file had when it began: a page past it was allocated from
 *   the end of the file afterwards, so it only ever held what was written after the deletion (a
 *   pass that followed a busy writer's growth would never end).
 * - The pass reads the whole file: its cost is a sequential read of the file per call plus writes
 *   of the pages that had old bytes (figures: packages/server/bench/README.md, "Page-gap scrub").
 */
import Database from 'better-sqlite3';
import { closeSync, fdatasyncSync, openSync, readSync, statSync, writeSync } from 'node:fs';

/** Pages read under one hold of the write lock. */
export const CHUNK_PAGES = 2048;
/** How long the lock is let go between two chunks, for writers asleep in their busy handler. */
export const CHUNK_PAUSE_MS = 50;
/** Above this many pages an overflow page's first byte could look like a b-tree page type. */
const MAX_PAGES = 2 ** 25;

export class ScrubRefusedError extends Error {
  override name = 'ScrubRefusedError';
}

export interface ScrubResult {
  /** False when the lock could not be had within the attempts (busy): call again later. */
  complete: boolean;
  /** b-tree pages read. */
  pages: number;
  /** Pages whose unallocated space held old bytes, now zeroed. */
  scrubbed: number;
  /** Bytes overwritten with zeros. */
  bytes: number;
}

/**
 * The unallocated space of a b-tree page (`[start, end)` within the page), or null when the page is
 * not a b-tree page with a consistent header. `headerOffset` is 100 on page 1, 0 elsewhere.
 */
export function unallocatedSpace(page: Uint8Array, headerOffset: number, usableSize: number): [number, number] | null {
  const type = page[headerOffset];
  if (type !== 2 && type !== 5 && type !== 10 && type !== 13) return null;
  const cells = (page[headerOffset + 3]! << 8) | page[headerOffset + 4]!;
  const content = ((page[headerOffset + 5]! << 8) | page[headerOffset + 6]!) || 65536;
  const pointers = headerOffset + (type === 2 || type === 5 ? 12 : 8) + 2 * cells;
  if (pointers > content || content > usableSize) return null;
  return [pointers, content];
}

interface Options {
  /** Attempts at the lock per chunk (each waits up to busyMs), with pauseMs between. */
  attempts?: number;
  busyMs?: number;
  pauseMs?: number;
  chunkPages?: number;
  chunkPauseMs?: number;
}

/** Zeroes the unallocated space of every b-tree page of the SQLite file (see the design note). */
export async function scrubPageGaps(file: string, options: Options = {}): Promise<ScrubResult> {
  const result: ScrubResult = { complete: false, pages: 0, scrubbed: 0, bytes: 0 };
  const db = new Database(file, { fileMustExist: true });
  let fd: number | null = null;
  try {
    db.pragma(`busy_timeout = ${options.busyMs ?? 250}`);
    if (String(db.pragma('journal_mode', { simple: true })).toLowerCase() !== 'wal') throw new ScrubRefusedError(`${file} is not in WAL mode`);
    if (db.pragma('auto_vacuum', { simple: true }) !== 0) throw new ScrubRefusedError(`${file} has auto_vacuum pages (pointer maps)`);
    const pageSize = db.pragma('page_size', { simple: true }) as number;
    const chunkPages = options.chunkPages ?? CHUNK_PAGES;
    const buffer = Buffer.alloc(chunkPages * pageSize);
    const zeros = Buffer.alloc(pageSize);
    fd = openSync(file, 'r+');
    let pagesAtStart = Infinity; // the page count when the pass began
    for (let first = 1; ; ) {
      if (!(await lockWithEmptyWal(db, file, options))) return result;
      let wrote = false;
      let last: number;
      try {
        if (pagesAtStart === Infinity) pagesAtStart = db.pragma('page_count', { simple: true }) as number;
        const pageCount = Math.min(pagesAtStart, db.pragma('page_count', { simple: true }) as number);
        if (pageCount >= MAX_PAGES) throw new ScrubRefusedError(`${file} has ${pageCount} pages, more than a scrub can tell apart`);
        const reserved = readReservedBytes(fd);
        const usable = pageSize - reserved;
        const lockBytePage = Math.floor(2 ** 30 / pageSize) + 1;
        last = Math.min(pageCount, first + chunkPages - 1);
        const length = (last - first + 1) * pageSize;
        const read = length > 0 ? readSync(fd, buffer, 0, length, (first - 1) * pageSize) : 0;
        for (let no = Math.max(first, 2); no <= last; no++) {
          const at = (no - first) * pageSize;
          if (no === lockBytePage || at + pageSize > read) continue;
          const page = buffer.subarray(at, at + pageSize);
          const gap = unallocatedSpace(page, 0, usable);
          if (!gap) continue;
          result.pages++;
          const [start, end] = gap;
          if (page.subarray(start, end).equals(zeros.subarray(0, end - start))) continue;
          writeSync(fd, zeros, 0, end - start, (no - 1) * pageSize + start);
          result.scrubbed++;
          result.bytes += end - start;
          wrote = true;
        }
        if (wrote) {
          fdatasyncSync(fd);
          // Every other connection drops its cached pages (design note, step 3).
          db.pragma(`user_version = ${db.pragma('user_version', { simple: true }) as number}`);
          db.exec('COMMIT');
        } else {
          db.exec('ROLLBACK');
        }
        if (last >= pageCount) break;
      } catch (error) {
        if (db.inTransaction) db.exec('ROLLBACK');
        throw error;
      }
      first = last + 1;
      await new Promise((resolve) => setTimeout(resolve, options.chunkPauseMs ?? CHUNK_PAUSE_MS));
    }
    result.complete = true;
    return result;
  } finally {
    if (fd !== null) closeSync(fd);
    db.close();
  }
}

/** Byte 20 of the database header: bytes reserved at the end of each page. */
function readReservedBytes(fd: number): number {
  const header = Buffer.alloc(1);
  readSync(fd, header, 0, 1, 20);
  return header[0]!;
}

/** Holds the write lock with an empty WAL (design note, step 1); false when busy throughout. */
async function lockWithEmptyWal(db: Database.Database, file: string, options: Options): Promise<boolean> {
  const attempts = options.attempts ?? 40;
  for (let i = 0; i < attempts; i++) {
    try {
      const [r] = db.pragma('wal_checkpoint(TRUNCATE)') as { busy: number }[];
      if (r && r.busy === 0) {
        db.exec('BEGIN IMMEDIATE');
        if ((statSync(`${file}-wal`, { throwIfNoEntry: false })?.size ?? 0) === 0) return true;
        db.exec('ROLLBACK'); // a commit came in between: again
        continue;
      }
    } catch {
      if (db.inTransaction) db.exec('ROLLBACK');
      // SQLITE_BUSY: another checkpoint, a writer, or a long reader; try again
    }
    await new Promise((resolve) => setTimeout(resolve, options.pauseMs ?? 50));
  }
  return false;
}
