/**
 * Who holds a deletion request's claim, and whether that process is still alive (issue 29: a worker
 * SIGKILLed mid-deletion left its claim for five minutes, and the restarted worker waited).
 *
 * An owner is "host/pid/start": the host name, the process id and the process's start time (in
 * clock ticks since boot, from /proc/<pid>/stat, so that a recycled pid is not mistaken for the
 * owner; the boot id makes a start time from before a reboot unique). A claim whose owner ran on
 * this host and whose process is gone (or is another process with the same pid) is dead: the next
 * worker takes it over at once. An owner on another host (PostgreSQL, several nodes) cannot be
 * checked from here: its claim is a lease it renews at every step, taken over once it lapsed.
 */
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';

function bootId(): string {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return 'unknown-boot';
  }
}

/** Start time of a process (field 22 of /proc/<pid>/stat), or null when there is none. */
function startTimeOf(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // pid (comm) state ppid ...: comm may hold spaces and parentheses; fields after it are plain.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

const HOST = hostname();
const BOOT = bootId();

/** This process as a claim owner. */
export const SELF_OWNER = `${HOST}/${process.pid}/${BOOT}:${startTimeOf(process.pid) ?? Date.now()}`;

/** True when `owner` ran on this host and that process no longer runs; false when alive or unknowable. */
export function ownerIsDead(owner: string | null): boolean {
  if (owner === null) return true;
  const [host, pid, start] = owner.split('/');
  if (host !== HOST || pid === undefined || start === undefined) return false;
  const [boot, ticks] = start.split(':');
  if (boot !== BOOT) return true; // claimed before this machine rebooted
  if (!/^\d+$/.test(pid)) return false;
  const now = startTimeOf(Number(pid));
  if (now === null) {
    // No /proc entry: gone (on Linux); elsewhere ask the kernel.
    try {
      process.kill(Number(pid), 0);
      return false;
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === 'ESRCH';
    }
  }
  return now !== ticks;
}
