/**
 * Process and admin-port tools for fault tests (Linux): kill a server with all its processes at
 * once, read a process's RSS, poll readiness and metrics.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';

/** Pids of every descendant of `pid` (from /proc), deepest last. */
export function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // pid (comm) state ppid ...; comm may contain spaces and parentheses.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const list = children.get(ppid) ?? [];
      list.push(Number(entry));
      children.set(ppid, list);
    } catch {
      // exited meanwhile
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const c of children.get(p) ?? []) {
      out.push(c);
      walk(c);
    }
  };
  walk(pid);
  return out;
}

/**
 * SIGKILL a process and all its descendants in one sweep, like a crash of the whole node: the
 * serving processes of `--workers N` must not get to finish anything on their own.
 */
export function killTree(pid: number): void {
  const all = [pid, ...descendants(pid)];
  for (const p of all) {
    try {
      process.kill(p, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

/** Resident set size in bytes of one process. */
export function rssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = /VmRSS:\s+(\d+) kB/.exec(status);
  return match ? Number(match[1]) * 1024 : 0;
}

export async function waitFor<T>(what: string, fn: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs = 10_000, everyMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

export async function readyz(adminPort: number): Promise<{ status: number; body: any }> {
  const res = await fetch(`http://127.0.0.1:${adminPort}/readyz`);
  return { status: res.status, body: await res.json() };
}

export async function metricsText(adminPort: number): Promise<string> {
  return (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
}

/**
 * The value of one sample as the exposition writes it: an unlabelled metric's name, or a name and
 * its labels (`ecapi_rate_limited_total{limit="body_wait"}`, labels in the order the metric declares
 * them); NaN when absent.
 */
export function metricValue(text: string, name: string): number {
  const sample = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const match = new RegExp(`^${sample} (\\S+)$`, 'm').exec(text);
  return match ? Number(match[1]) : Number.NaN;
}

/** True when this process may mount filesystems (root with CAP_SYS_ADMIN, outside a restricted container). */
export function canMount(dir: string): boolean {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir], { stdio: 'ignore' });
    execFileSync('umount', [dir], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export function hasCommand(name: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
