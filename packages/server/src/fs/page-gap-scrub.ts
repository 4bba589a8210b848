/**
 * Zeroing what SQLite leaves of moved cells in its b-tree pages: the last place an erased record
 * could stay in an embedded file once its rows are deleted (docs/SECURITY.md, "Old copies in
 * rebuilt pages").
 *
 * Why it is needed: `secure_delete` zeroes a deleted cell and a freed page, but when SQLite rebuilds
 * a page (a split or merge: btree.c `rebuildPage`) it writes the page's cells back from the end and
 * leaves the space between the cell pointer array and the new cell content area as it was: old
 * copies of cells, including cells that now live elsewhere. Deleting such a cell later zeroes it
 * where it lives now, not the old copy. That space is unallocated: SQLite never reads it, and takes
 * from its top when it needs room (`allocateSpace`), so zeroing it changes no row.
 *
 * How, under one hold of the write lock (a "sweep", on a connection of its own):
 * 1. `wal_checkpoint(TRUNCATE)`, then `BEGIN IMMEDIATE`, and the WAL must still be zero bytes long.
 *    With the write lock held and no frame in the WAL, the main file holds the newest image of every
 *    page and nothing can change it: a checkpoint only copies frames, and no writer can add one.
 *    Otherwise (a commit slipped in between) the attempt is rolled back and made again.
 * 2. Each b-tree page of the sweep is read from the file; where its unallocated space is not all
 *    zeros, those bytes (and only those) are overwritten with zeros and the file is fdatasync'ed.
 * 3. A commit of the same `user_version` (also when a sweep fails after it wrote): it changes the
 *    WAL header, so every other connection (the consumer's, the eraser's, other processes') drops
 *    its page cache at its next transaction instead of writing back a cached page image with the
 *    old bytes in it. Page 1, which that commit rewrites from this connection's cache, is not
 *    scrubbed: it is the schema table's root and only ever holds schema rows.
 *
 * Two passes:
 * - The first sweeps chunk by chunk (CHUNK_BYTES, 8 MiB) and lets the lock go for CHUNK_PAUSE_MS
 *   between chunks: it does the bulk of the zeroing and syncing while writers go on. A writer waiting
 *   in SQLite's busy handler sleeps up to 100 ms between tries, so a scrub that took the lock back at
 *   once would starve it (measured: one commit waited 534 ms in a 0.7 s pass).
 * - It cannot be trusted on its own: between two chunks a writer's page split can move an old copy
 *   from a page not swept yet to one already swept (btree.c `balance_nonroot` gives the sibling
 *   pages' buffers, unallocated space included, new page numbers in order with
 *   `sqlite3PagerRekey`). So a second pass sweeps the whole file under one hold, which nothing can
 *   change meanwhile: after it, every page is clean. The first pass leaves it mostly reads of pages
 *   it has just read (the page cache), so the hold is short (bench/README.md, "Page-gap scrub"). A
 *   second pass that would hold the lock past FINAL_SWEEP_MAX_MS (a file far larger than memory) is
 *   cut short and the scrub reported incomplete: writers (ingest polls for up to 5 s) are never held
 *   that long, and the caller tries again later.
 *
 * Invariants and hazards:
 * - Only b-tree pages are touched, told apart by their type byte (2, 5, 10, 13) with a consistent
 *   header. Overflow and freelist trunk pages begin with a page number, whose first byte is 0 or 1 in
 *   a file of fewer than 2^25 pages; a larger file, a pointer-map page (auto_vacuum) or a journal
 *   mode other than WAL is refused (ScrubRefusedError), never guessed at. A free page that looks like
 *   a b-tree page holds nothing any row uses, so zeroing part of it is harmless too.
 * - The raw file descriptor is never closed (rawFile): on Linux, closing any descriptor of a file
 *   drops every POSIX lock this process holds on it, the consumer's SQLite locks included, and
 *   another process could then take the file exclusively under them (seen: rows a writer committed
 *   were lost). The path is resolved (realpath), as SQLite resolves it to name the WAL.
 * - A pass ends at the page count the file had when the scrub began: a page past it was allocated
 *   from the end of the file afterwards, and a split never gives a page a number above the largest
 *   of its siblings, so such a page only ever held what was written after the deletion.
 */
import Database from 'better-sqlite3';
import { fdatasyncSync, fstatSync, openSync, readSync, realpathSync, statSync, writeSync } from 'node:fs';
import { truncateWal } from './wal-truncation.js';

/** Bytes read under one hold of the write lock in the first pass. */
export const CHUNK_BYTES = 8 * 1024 * 1024;
/** How long the first pass lets the lock go between two chunks, for writers asleep in their busy handler. */
export const CHUNK_PAUSE_MS = 50;
/** The longest the second pass holds the lock before it gives up (the scrub then reports incomplete). */
export const FINAL_SWEEP_MAX_MS = 2000;
/** Above this many pages an overflow page's first byte could look like a b-tree page type. */
const MAX_PAGES = 2 ** 25;

export class ScrubRefusedError extends Error {
  override name = 'ScrubRefusedError';
}

export interface ScrubResult {
  /** False when the lock could not be had (busy), or the second pass ran out of time: call again later. */
  complete: boolean;
  /** b-tree pages read (both passes). */
  pages: number;
  /** Pages whose unallocated space held old bytes, now zeroed (both passes). */
  scrubbed: number;
  /** Bytes overwritten with zeros. */
  bytes: number;
  /** How long the second pass held the write lock (ms): what a writer waited at most meanwhile. */
  finalHoldMs: number;
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
  /** Attempts at the lock per sweep (each waits up to busyMs), with pauseMs between. */
  attempts?: number;
  busyMs?: number;
  pauseMs?: number;
  chunkBytes?: number;
  chunkPauseMs?: number;
  finalSweepMaxMs?: number;
}

/** Zeroes the unallocated space of every b-tree page of the SQLite file (see the design note). */
export async function scrubPageGaps(file: string, options: Options = {}): Promise<ScrubResult> {
  const result: ScrubResult = { complete: false, pages: 0, scrubbed: 0, bytes: 0, finalHoldMs: 0 };
  const path = realpathSync(file);
  const db = new Database(path, { fileMustExist: true });
  try {
    db.pragma(`busy_timeout = ${options.busyMs ?? 250}`);
    if (String(db.pragma('journal_mode', { simple: true })).toLowerCase() !== 'wal') throw new ScrubRefusedError(`${file} is not in WAL mode`);
    if (db.pragma('auto_vacuum', { simple: true }) !== 0) throw new ScrubRefusedError(`${file} has auto_vacuum pages (pointer maps)`);
    const pageSize = db.pragma('page_size', { simple: true }) as number;
    const sweeper = new Sweeper(db, path, pageSize, Math.max(1, Math.floor((options.chunkBytes ?? CHUNK_BYTES) / pageSize)), result);
    // First pass: chunk by chunk, writers going on between chunks.
    let pagesAtStart = 0;
    for (let first = 1; ; ) {
      if (!(await lockWithEmptyWal(db, path, options))) return result;
      if (pagesAtStart === 0) pagesAtStart = db.pragma('page_count', { simple: true }) as number;
      const last = Math.min(pagesAtStart, first + sweeper.chunkPages - 1);
      sweeper.sweep(first, last, Infinity);
      if (last >= pagesAtStart) break;
      first = last + 1;
      await new Promise((resolve) => setTimeout(resolve, options.chunkPauseMs ?? CHUNK_PAUSE_MS));
    }
    // Second pass: the whole file under one hold (what a split moved between chunks).
    if (!(await lockWithEmptyWal(db, path, options))) return result;
    const held = performance.now();
    result.complete = sweeper.sweep(1, pagesAtStart, held + (options.finalSweepMaxMs ?? FINAL_SWEEP_MAX_MS));
    result.finalHoldMs = performance.now() - held;
    return result;
  } finally {
    db.close();
  }
}

/** Sweeps pages under a hold that lockWithEmptyWal took, and ends the hold (design note, steps 2-3). */
class Sweeper {
  readonly #buffer: Buffer;
  readonly #zeros: Buffer;
  readonly #fd: number;
  readonly #lockBytePage: number;

  constructor(
    private readonly db: Database.Database,
    private readonly path: string,
    private readonly pageSize: number,
    readonly chunkPages: number,
    private readonly result: ScrubResult,
  ) {
    this.#buffer = Buffer.alloc(chunkPages * pageSize);
    this.#zeros = Buffer.alloc(pageSize);
    this.#fd = rawFile(path);
    this.#lockBytePage = Math.floor(2 ** 30 / pageSize) + 1;
  }

  /** Pages first..last, in chunks, until `deadline` (performance.now()); true when it got to the end. */
  sweep(first: number, last: number, deadline: number): boolean {
    const { db, pageSize, result } = this;
    let wrote = false;
    try {
      const pageCount = Math.min(last, db.pragma('page_count', { simple: true }) as number);
      if (pageCount >= MAX_PAGES) throw new ScrubRefusedError(`${this.path} has ${pageCount} pages, more than a scrub can tell apart`);
      const reserved = Buffer.alloc(1);
      readSync(this.#fd, reserved, 0, 1, 20); // byte 20 of the header: bytes reserved at the end of each page
      const usable = pageSize - reserved[0]!;
      for (let from = first; from <= pageCount; from += this.chunkPages) {
        if (performance.now() > deadline) return false;
        const to = Math.min(pageCount, from + this.chunkPages - 1);
        const read = readSync(this.#fd, this.#buffer, 0, (to - from + 1) * pageSize, (from - 1) * pageSize);
        for (let no = Math.max(from, 2); no <= to; no++) {
          const at = (no - from) * pageSize;
          if (no === this.#lockBytePage || at + pageSize > read) continue;
          const page = this.#buffer.subarray(at, at + pageSize);
          const gap = unallocatedSpace(page, 0, usable);
          if (!gap) continue;
          result.pages++;
          const [start, end] = gap;
          if (page.subarray(start, end).equals(this.#zeros.subarray(0, end - start))) continue;
          writeSync(this.#fd, this.#zeros, 0, end - start, (no - 1) * pageSize + start);
          result.scrubbed++;
          result.bytes += end - start;
          wrote = true;
        }
      }
      return true;
    } finally {
      // Also when it failed or ran out of time after it wrote: the other connections must drop their
      // cached pages (step 3).
      if (wrote) {
        fdatasyncSync(this.#fd);
        db.pragma(`user_version = ${db.pragma('user_version', { simple: true }) as number}`);
        db.exec('COMMIT');
      } else if (db.inTransaction) {
        db.exec('ROLLBACK');
      }
    }
  }
}

/**
 * One descriptor per file for the life of the process, never closed: closing any descriptor of a
 * file drops every POSIX lock this process holds on it, SQLite's included (design note). A file
 * replaced under the same path (another inode) gets a descriptor of its own; the old one stays open.
 */
const rawFiles = new Map<string, number>();

function rawFile(path: string): number {
  const known = rawFiles.get(path);
  if (known !== undefined) {
    const now = statSync(path);
    const held = fstatSync(known);
    if (now.ino === held.ino && now.dev === held.dev) return known;
  }
  const fd = openSync(path, 'r+');
  rawFiles.set(path, fd);
  return fd;
}

/** Holds the write lock with an empty WAL (design note, step 1); false when busy throughout. */
async function lockWithEmptyWal(db: Database.Database, path: string, options: Options): Promise<boolean> {
  const attempts = options.attempts ?? 40;
  for (let i = 0; i < attempts; i++) {
    // One TRUNCATE attempt: it waits up to busyMs and, when busy, pauses pauseMs (wal-truncation.ts).
    if (!(await truncateWal(db, { attempts: 1, busyMs: options.busyMs, pauseMs: options.pauseMs }))) continue;
    try {
      db.exec('BEGIN IMMEDIATE');
    } catch {
      continue; // SQLITE_BUSY after busyMs: a writer took the lock first
    }
    if ((statSync(`${path}-wal`, { throwIfNoEntry: false })?.size ?? 0) === 0) return true;
    db.exec('ROLLBACK'); // a commit came in between: again
  }
  return false;
}
