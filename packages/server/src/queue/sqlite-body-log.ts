/**
 * The body log of the embedded queue: large request bodies are appended to plain files and synced,
 * and the queue's SQLite row keeps only where they are (file number, offset, length).
 *
 * Why: a body stored in SQLite is written twice, once into the WAL by the commit and once more into
 * the database file by the checkpoint. For 1,000-event batches (~850 KB each) that second write was
 * what bounded ingest on a small machine's disk. Here a body is written once, sequentially.
 *
 * Invariants (the writer thread upholds them; see DESIGN.md):
 * - Space is allocated from the `queue_log_head` row INSIDE the queue's write transaction, so
 *   several processes appending to one queue file never write the same bytes. `queue_log_head` is
 *   the committed end of the log: no committed row points at or past it (in its file, or in any
 *   later file).
 * - Bodies are written and fdatasync'ed BEFORE the transaction that references them commits. A
 *   committed row therefore always points at durable bytes; bytes without a committed row are
 *   garbage and never read.
 * - Garbage does not stay: bytes past the committed end (a commit that failed after its bodies
 *   were written, a writer killed between the two) hold identifiers and event ids that no row
 *   points at, so no erasure would ever reach them. `trimTo` cuts the log back to the committed
 *   end (ftruncate: it needs no free space, unlike zeroing) and syncs the cut; the writer thread
 *   calls it holding the write lock, with the head read in the same transaction, after every
 *   failed commit that had bodies and once when it starts. `append` also cuts whatever lies past
 *   the offset it starts writing a file at before writing there (one fstat; the cut, rare, is made
 *   durable by the fdatasync the bodies need anyway): garbage another process left behind cannot
 *   end up below the head, where a trim no longer reaches.
 * - Log files are cut, never unlinked, past the head: another process may still hold a
 *   descriptor to them, and must keep writing into the file the name designates.
 * - A new log file's directory entry is synced before any row points into it, and so is the log
 *   directory's own entry in its parent (fs/durable-files.ts).
 * - Files are opened without O_APPEND and written at explicit offsets: O_APPEND would ignore the
 *   offset the transaction allocated.
 */
import { closeSync, fdatasyncSync, fstatSync, fsyncSync, ftruncateSync, openSync, readdirSync, readSync, writevSync, constants as fsc } from 'node:fs';
import { join } from 'node:path';
import { ensureDirDurably, syncDirectory } from '../fs/durable-files.js';

/** Bodies at least this large go to the log; smaller ones stay inline in their SQLite row. */
export const BODY_LOG_MIN_BYTES = 32 * 1024;
/** A log file is closed to new bodies once it would grow past this. */
export const BODY_LOG_FILE_BYTES = 256 * 1024 * 1024;

/** The directory of a queue file's body log: `<queue.db>-bodies/`, beside SQLite's own `-wal`. */
export function bodyLogDir(queueFile: string): string {
  return `${queueFile}-bodies`;
}

export function bodyLogFile(dir: string, fileNo: number): string {
  return join(dir, `${String(fileNo).padStart(8, '0')}.log`);
}

/** Where one body was written. */
export interface BodyLocation {
  readonly fileNo: number;
  readonly offset: number;
  readonly length: number;
}

/** The log's end as recorded by the last committed transaction. */
export interface BodyLogHead {
  readonly fileNo: number;
  readonly endOffset: number;
}

/**
 * Writes one commit group's bodies. Used by the writer thread only, inside its write transaction.
 */
export class BodyLogWriter {
  readonly #dir: string;
  readonly #fileBytes: number;
  readonly #fds = new Map<number, number>();

  constructor(dir: string, options: { fileBytes?: number } = {}) {
    this.#dir = dir;
    this.#fileBytes = options.fileBytes ?? BODY_LOG_FILE_BYTES;
  }

  #fd(fileNo: number): number {
    let fd = this.#fds.get(fileNo);
    if (fd !== undefined) return fd;
    // The directory itself may be new: its entry in the environment's directory must be durable
    // before a committed row points into it, or a power failure can remove it with every body in it.
    ensureDirDurably(this.#dir);
    fd = openSync(bodyLogFile(this.#dir, fileNo), fsc.O_RDWR | fsc.O_CREAT, 0o600);
    // The file may be new: make its name durable before a committed row can point into it.
    syncDirectory(this.#dir);
    // Files before this one are complete: no process writes to them again.
    for (const [no, old] of this.#fds) {
      if (no < fileNo) {
        closeSync(old);
        this.#fds.delete(no);
      }
    }
    this.#fds.set(fileNo, fd);
    return fd;
  }

  /**
   * Writes `bodies` after `head` (rolling to a new file when the current one is full), syncs them,
   * and returns each body's location and the new head. Throws on any I/O error: the caller rolls
   * its transaction back, nothing written here is referenced, and the caller cuts it off again
   * (`trimTo`). `head` must be the committed end read under the write lock: anything a file holds
   * past the offset this writes it from is garbage and is cut first.
   */
  append(head: BodyLogHead, bodies: readonly Uint8Array[]): { locations: BodyLocation[]; head: BodyLogHead } {
    const locations: BodyLocation[] = [];
    let { fileNo, endOffset } = head;
    let run: Uint8Array[] = [];
    let runStart = endOffset;
    // Writes the bodies gathered for the current file and syncs that file before moving on.
    const flush = () => {
      if (run.length === 0) return;
      const fd = this.#fd(fileNo);
      // Bytes past the committed end, left by a failed commit or a killed writer (of any process),
      // would survive under bodies committed from here on: cut them first. No fsync of its own:
      // the fdatasync below makes the new size durable with the bodies.
      if (fstatSync(fd).size > runStart) ftruncateSync(fd, runStart);
      let position = runStart;
      // writevSync may write less than asked (signals, very large runs): continue where it stopped.
      let pending = run;
      while (pending.length > 0) {
        let written = writevSync(fd, pending, position);
        position += written;
        const rest: Uint8Array[] = [];
        for (const buffer of pending) {
          if (written >= buffer.byteLength) {
            written -= buffer.byteLength;
          } else {
            rest.push(written > 0 ? buffer.subarray(written) : buffer);
            written = 0;
          }
        }
        pending = rest;
      }
      fdatasyncSync(fd);
      run = [];
    };
    for (const body of bodies) {
      if (endOffset > 0 && endOffset + body.byteLength > this.#fileBytes) {
        flush();
        fileNo += 1;
        endOffset = 0;
        runStart = 0;
      }
      locations.push({ fileNo, offset: endOffset, length: body.byteLength });
      run.push(body);
      endOffset += body.byteLength;
    }
    flush();
    return { locations, head: { fileNo, endOffset } };
  }

  /**
   * Cuts the log back to `head`: the head's file to its end offset, every later file to zero bytes,
   * and syncs each file it cut. Returns the bytes removed. Call it only while holding the queue's
   * write lock, with `head` read from `queue_log_head` in that same transaction: then no committed
   * row points at what it cuts, and no other writer is between its append and its commit.
   * Truncation frees space rather than needing it, so it works on a full disk.
   */
  trimTo(head: BodyLogHead): number {
    let names: string[];
    try {
      names = readdirSync(this.#dir);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 0; // no body log yet
      throw error;
    }
    let removed = 0;
    for (const name of names) {
      const match = /^(\d+)\.log$/.exec(name);
      if (!match) continue;
      const fileNo = Number(match[1]);
      if (fileNo >= head.fileNo) removed += this.#cut(fileNo, fileNo === head.fileNo ? head.endOffset : 0);
    }
    return removed;
  }

  #cut(fileNo: number, end: number): number {
    const cached = this.#fds.get(fileNo);
    let fd: number;
    if (cached !== undefined) fd = cached;
    else {
      try {
        fd = openSync(bodyLogFile(this.#dir, fileNo), fsc.O_RDWR);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 0;
        throw error;
      }
    }
    try {
      const size = fstatSync(fd).size;
      if (size <= end) return 0;
      ftruncateSync(fd, end);
      // Only after a failure or at start: a power failure must not bring the bytes back.
      fsyncSync(fd);
      return size - end;
    } finally {
      if (cached === undefined) closeSync(fd);
    }
  }

  close(): void {
    for (const fd of this.#fds.values()) closeSync(fd);
    this.#fds.clear();
  }
}

/** Reads one logged body. The row that points at it is committed, so the bytes are all there. */
export function readLoggedBody(dir: string, location: BodyLocation): Buffer {
  const fd = openSync(bodyLogFile(dir, location.fileNo), 'r');
  try {
    const body = Buffer.allocUnsafe(location.length);
    let read = 0;
    while (read < location.length) {
      const n = readSync(fd, body, read, location.length - read, location.offset + read);
      if (n === 0) throw new Error(`queue body log ${location.fileNo} is shorter than a committed row says`);
      read += n;
    }
    return body;
  } finally {
    closeSync(fd);
  }
}
