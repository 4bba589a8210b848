/**
 * Where does the CPU go, per thread? Runs the real service (--no-worker) with one wrk scenario and
 * reads utime+stime of every thread of the service and of wrk from /proc during the middle of the
 * run, plus the machine's busy/idle split. CPU percentages are of one core.
 *
 *   node packages/server/dist/bench/thread-cpu.js [single|batch100|batch1000] [--workers N] [more serve args]
 */
import { readdirSync, readFileSync } from 'node:fs';
import { startBenchService } from './bench-service.js';
import { runWrk } from './wrk-runner.js';

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

/** Threads of every process whose command line matches, with their CPU ticks so far. */
function threadTicks(match: RegExp): Map<string, number> {
  const ticks = new Map<string, number>();
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (!match.test(readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' '))) continue;
      for (const tid of readdirSync(`/proc/${pid}/task`)) {
        const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
        const name = /\((.*)\)/.exec(stat)?.[1] ?? '?';
        const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        ticks.set(`pid ${pid} tid ${tid} ${name}`, Number(fields[11]) + Number(fields[12]));
      }
    } catch {
      // exited meanwhile
    }
  }
  return ticks;
}

function machineTicks(): { busy: number; idle: number } {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.split(/\s+/).slice(1).map(Number);
  return { busy: f[0]! + f[1]! + f[2]! + f[5]! + f[6]! + f[7]!, idle: f[3]! + f[4]! };
}

async function main(): Promise<void> {
  const scenario = process.argv[2] ?? 'single';
  const serveArgs = process.argv.slice(3);
  const seconds = 8;
  const { server, script, events } = await startBenchService({ scenario, serveArgs });
  const match = /ecapi-ingest|wrk/;
  const window = { from: 2000, to: 6000 };
  let before = new Map<string, number>();
  let machineBefore = machineTicks();
  const report: string[] = [];
  setTimeout(() => {
    before = threadTicks(match);
    machineBefore = machineTicks();
  }, window.from);
  setTimeout(() => {
    const after = threadTicks(match);
    const machine = machineTicks();
    const secondsMeasured = (window.to - window.from) / 1000;
    const rows = [...after]
      .map(([thread, t]) => [thread, ((t - (before.get(thread) ?? t)) / TICKS_PER_SECOND / secondsMeasured) * 100] as const)
      .filter(([, pct]) => pct >= 1)
      .sort((a, b) => b[1] - a[1]);
    for (const [thread, pct] of rows) report.push(`${pct.toFixed(0).padStart(4)}%  ${thread}`);
    const busy = machine.busy - machineBefore.busy;
    const idle = machine.idle - machineBefore.idle;
    report.push(`machine: ${((busy / (busy + idle)) * 100).toFixed(0)}% busy over all cores`);
  }, window.to);
  const result = await runWrk(`https://127.0.0.1:${server.port}`, script, { seconds, connections: 50, threads: 2 });
  await server.stop();
  process.stdout.write(`${scenario}: ${result.requestsPerSecond.toFixed(0)} req/s, ${(result.requestsPerSecond * events).toFixed(0)} events/s, p99 ${result.p99Ms} ms\n`);
  process.stdout.write(`CPU per thread, % of one core, seconds ${window.from / 1000}-${window.to / 1000} of the run:\n${report.join('\n')}\n`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  },
);
