/**
 * The one way this service creates a file or a directory that must survive a power failure.
 *
 * Why: on ext4 and xfs, `write` + `close` leaves the data in the page cache (written back ~30 s
 * later), and a new directory entry (from `mkdir`, `open(O_CREAT)`, `rename`, `link`) is durable
 * only once its PARENT directory has been fsynced. Without both, a power cut in the first seconds
 * brings `master.key` back as a 0-byte file, or removes a whole new directory with everything
 * below it, including files that were themselves fsynced (issue 21).
 *
 * Rules:
 * - A file: written to a temporary file in the same directory, created with its final mode (O_EXCL,
 *   0600 by default: it is never readable by others, not even for a moment), fsynced, then renamed
 *   (or, when it must not replace an existing file, hard-linked) into place, then the directory
 *   is fsynced. A reader sees the old content or the complete new one, never a torn or empty file.
 * - A directory: every missing component is created with its final mode (0700) and its parent is
 *   fsynced right after each `mkdir`. A directory that already exists gets its parent fsynced once
 *   per process as well: it may come from a run that was killed between the `mkdir` and the fsync.
 * - An empty file that another library fills and syncs (SQLite's databases): created with O_EXCL
 *   and its final mode, so that SQLite's -wal and -shm inherit 0600, and its directory fsynced.
 *
 * Directory fsync errors EINVAL/ENOTSUP (file systems that cannot sync a directory) are ignored, as
 * SQLite does; every other error is thrown. Everything here is synchronous: it runs at start-up, in
 * CLI commands, and on the queue's writer thread, never on a request's event loop path.
 */
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  constants as fsc,
  existsSync,
  fsyncSync,
  linkSync,
  mkdirSync,
  openSync,
  renameSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';

export const PRIVATE_FILE_MODE = 0o600;
export const PRIVATE_DIR_MODE = 0o700;

/** Directories whose entry this process has made durable (per thread: module state). */
const durableDirs = new Set<string>();

/** fsyncs a directory, making the entries created, renamed or removed in it durable. */
export function syncDirectory(dir: string): void {
  const fd = openSync(dir, fsc.O_RDONLY | fsc.O_DIRECTORY);
  try {
    fsyncSync(fd);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'EINVAL' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP') throw error;
  } finally {
    closeSync(fd);
  }
}

/**
 * Makes `dir` exist durably: creates each missing component with `mode` and fsyncs its parent after
 * each `mkdir`. Safe when other processes create the same directories at the same moment.
 */
export function ensureDirDurably(dir: string, mode: number = PRIVATE_DIR_MODE): void {
  const target = resolve(dir);
  if (durableDirs.has(target)) return;
  const missing: string[] = [];
  for (let p = target; !existsSync(p); p = dirname(p)) {
    missing.unshift(p);
    if (dirname(p) === p) break;
  }
  for (const component of missing) {
    try {
      mkdirSync(component, { mode });
    } catch (error) {
      // Another process created it meanwhile; it syncs the parent too, and so do we below.
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    syncDirectory(dirname(component));
  }
  if (missing.length === 0 && dirname(target) !== target) {
    // It existed: its entry may come from a run killed before the sync. Best effort: a parent this
    // process cannot open (a directory without read permission above the data dir) is skipped.
    try {
      syncDirectory(dirname(target));
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'EACCES' && code !== 'EPERM') throw error;
    }
  }
  durableDirs.add(target);
}

function writeAll(fd: number, data: Uint8Array): void {
  let written = 0;
  while (written < data.byteLength) written += writeSync(fd, data, written, data.byteLength - written);
}

/** Moves `temp` to `file` unless `file` exists (EEXIST). */
function placeExclusively(temp: string, file: string): void {
  try {
    linkSync(temp, file);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // File systems without hard links: a check then a rename (a race with another process creating
    // the same file at the same moment is not excluded there).
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP' && code !== 'ENOSYS') throw error;
    if (existsSync(file)) throw Object.assign(new Error(`EEXIST: file already exists, ${file}`), { code: 'EEXIST' });
    renameSync(temp, file);
    return;
  }
  unlinkSync(temp);
}

/**
 * Writes `data` to `file` so that after a power failure the file holds either its previous content
 * (or does not exist) or all of `data`, with `mode` from the moment it exists. The directory must
 * exist (ensureDirDurably). `exclusive`: never replace an existing file; throws EEXIST instead.
 */
export function writeFileDurably(
  file: string,
  data: string | Uint8Array,
  options: { mode?: number; exclusive?: boolean } = {},
): void {
  const dir = dirname(resolve(file));
  const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  const temp = join(dir, `.${basename(file)}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`);
  const fd = openSync(temp, fsc.O_WRONLY | fsc.O_CREAT | fsc.O_EXCL, options.mode ?? PRIVATE_FILE_MODE);
  let placed = false;
  try {
    try {
      writeAll(fd, bytes);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    if (options.exclusive) {
      placeExclusively(temp, file); // EEXIST when the file exists: it is never replaced
      placed = true;
    } else {
      renameSync(temp, file);
      placed = true;
    }
  } catch (error) {
    try {
      unlinkSync(temp);
    } catch {
      // already gone (renamed or removed)
    }
    if (!placed) throw error;
  }
  syncDirectory(dir);
}

/**
 * Creates `file` empty with `mode` unless it exists, and makes its entry durable. For SQLite
 * databases: SQLite writes and syncs their content, and creates -wal/-shm with the database's mode.
 * Returns whether this call created it.
 */
export function createEmptyFileDurably(file: string, mode: number = PRIVATE_FILE_MODE): boolean {
  let fd: number;
  try {
    fd = openSync(file, fsc.O_WRONLY | fsc.O_CREAT | fsc.O_EXCL, mode);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  }
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  syncDirectory(dirname(resolve(file)));
  return true;
}

/** Creates the directory of a SQLite database and the empty database file, both durably and private. */
export function prepareDatabaseFile(file: string): void {
  ensureDirDurably(dirname(resolve(file)));
  createEmptyFileDurably(file);
}
