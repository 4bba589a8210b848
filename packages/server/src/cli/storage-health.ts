/**
 * What the CLI says when the data dir's disk is full or the consumer is alive but cannot write
 * (issue 29): a full disk used to surface as "Cannot read properties of null (reading 'state')" from
 * `identities forget`, and a consumer that could no longer write its heartbeat was reported "not
 * running" by `worker status` while its process was alive. Pure helpers plus two probes of the
 * machine (free bytes of the data dir's file system, whether a pid is an ecapi-ingest process).
 */
import { readFileSync, statfsSync } from 'node:fs';

/** An error that means "no space left": SQLite's SQLITE_FULL, the kernel's ENOSPC, PostgreSQL's disk_full (53100). */
export function isDiskFull(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e && typeof e === 'object' && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (code === 'SQLITE_FULL' || code === 'ENOSPC' || code === '53100') return true;
    const message = (e as { message?: unknown }).message;
    if (typeof message === 'string' && /database or disk is full|no space left on device|could not extend file/i.test(message)) return true;
  }
  return false;
}

/** The one line for a command that failed on a full disk (`where`: the data dir, or PostgreSQL). */
export function diskFullMessage(where: { dataDir: string; databaseUrl?: string | undefined }, error: unknown): string {
  const detail = error instanceof Error ? error.message.split('\n')[0] : String(error);
  return where.databaseUrl
    ? `cannot write to the PostgreSQL database: its server's disk is full (${detail}); free space there and run the command again`
    : `cannot write to the data dir ${where.dataDir}: the disk is full (${detail}); free space on that file system and run the command again`;
}

/** Free and total bytes of the file system holding `dir` (null when it cannot be read). */
export function freeSpace(dir: string): { free: number; total: number } | null {
  try {
    const s = statfsSync(dir);
    return { free: s.bavail * s.bsize, total: s.blocks * s.bsize };
  } catch {
    return null;
  }
}

/** Full enough that SQLite cannot grow a file: under 1 MiB or 0.5% of the file system free. */
export function diskIsFull(space: { free: number; total: number }): boolean {
  return space.free < Math.max(1024 * 1024, space.total * 0.005);
}

/**
 * Whether `pid` is a live ecapi-ingest process on this machine (a stale heartbeat's pid may have been
 * reused by another program: on Linux its command line must name ecapi-ingest).
 */
export function ecapiProcessAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('ecapi-ingest');
  } catch {
    return true; // no /proc: the signal check is all there is
  }
}

export const formatBytes = (n: number) =>
  n >= 1024 ** 3 ? `${(n / 1024 ** 3).toFixed(1)} GiB` : n >= 1024 ** 2 ? `${(n / 1024 ** 2).toFixed(1)} MiB` : n >= 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${n} bytes`;
