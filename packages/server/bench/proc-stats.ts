/** Memory of a process tree from /proc (Linux), for the benchmarks' peak-RSS figures. */
import { readdirSync, readFileSync } from 'node:fs';

/** A process and its descendants. */
export function processTree(pid: number): number[] {
  const pids = [pid];
  for (let i = 0; i < pids.length; i++) {
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
        const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
        if (ppid === pids[i] && !pids.includes(Number(entry))) pids.push(Number(entry));
      } catch {
        // exited meanwhile
      }
    }
  }
  return pids;
}

/** RSS (VmRSS, or the peak VmHWM) summed over a process tree, and the largest single process, in MB. */
export function treeRssMb(pids: readonly number[], field: 'VmRSS' | 'VmHWM'): { sum: number; largest: number } {
  let sum = 0;
  let largest = 0;
  for (const p of pids) {
    try {
      const kb = Number(new RegExp(`${field}:\\s+(\\d+)`).exec(readFileSync(`/proc/${p}/status`, 'utf8'))?.[1] ?? 0);
      sum += kb;
      largest = Math.max(largest, kb);
    } catch {
      // exited meanwhile
    }
  }
  return { sum: Math.round(sum / 1024), largest: Math.round(largest / 1024) };
}

/** CPU time (user + system, all threads, in seconds) used so far by the processes of a tree. */
export function treeCpuSeconds(pids: readonly number[]): number {
  let ticks = 0;
  for (const p of pids) {
    try {
      const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // exited meanwhile
    }
  }
  return ticks / 100; // USER_HZ
}

/**
 * Samples the tree's RSS every 100 ms until stopped; returns the highest sum and largest process
 * seen. The tree is listed once, unless `relist` (a tree that may grow children later, like a
 * consumer starting threads or processes: listed again every second).
 */
export function sampleRss(pid: number, options: { relist?: boolean } = {}): () => { sum: number; largest: number } {
  const peak = { sum: 0, largest: 0 };
  let pids = processTree(pid);
  let ticks = 0;
  const timer = setInterval(() => {
    if (options.relist && ++ticks % 10 === 0) pids = processTree(pid);
    const now = treeRssMb(pids, 'VmRSS');
    peak.sum = Math.max(peak.sum, now.sum);
    peak.largest = Math.max(peak.largest, now.largest);
  }, 100);
  return () => {
    clearInterval(timer);
    return peak;
  };
}
