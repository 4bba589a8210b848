/**
 * The ablation ladder (issue 17): single events against each rung of ladder-server.ts, then the
 * real `serve --workers 1 --no-worker`, one after another with the same wrk load. For each rung:
 * req/s, and the CPU of the serving thread (and of the whole process) per request, read from
 * /proc/<pid>/task/<tid>/schedstat (nanoseconds on CPU) just before and just after the wrk run.
 * CPU per request is the robust figure on a shared machine: it does not depend on how much CPU the
 * other tenants leave, only on the work done per request.
 */
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { startServer } from '../test/helpers/server-process.js';
import { runWrk, type WrkResult } from './wrk-runner.js';
import { LADDER_RUNGS } from './ladder-rungs.js';

export interface LadderRow {
  readonly rung: string;
  readonly rps: number;
  readonly p99Ms: number;
  readonly non2xx: number;
  /** Serving (main) thread CPU per request, µs. */
  readonly threadUsPerRequest: number;
  /** Every thread of the process, µs per request. */
  readonly processUsPerRequest: number;
}

/** Nanoseconds on CPU of one thread (schedstat's first field). */
function threadNs(pid: number, tid: number): number {
  return Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
}

function processNs(pid: number): number {
  let sum = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      sum += threadNs(pid, Number(tid));
    } catch {
      // exited meanwhile
    }
  }
  return sum;
}

/** Runs wrk against a server process and prices its requests in CPU. */
export async function measureCpuPerRequest(pid: number, url: string, script: string, wrk: { seconds: number; connections: number; threads: number }): Promise<{ result: WrkResult; threadUs: number; processUs: number }> {
  const t0 = threadNs(pid, pid);
  const p0 = processNs(pid);
  const result = await runWrk(url, script, wrk);
  const t1 = threadNs(pid, pid);
  const p1 = processNs(pid);
  const requests = Math.max(1, result.totalRequests);
  return { result, threadUs: (t1 - t0) / 1000 / requests, processUs: (p1 - p0) / 1000 / requests };
}

/** Starts one rung of a ladder server (`script`: this build's ladder-server.js unless another build's is named). */
export async function startRung(
  rung: string,
  dataDir: string,
  secret: string,
  script = fileURLToPath(new URL('./ladder-server.js', import.meta.url)),
): Promise<{ pid: number; port: number; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, [script, rung, dataDir, secret], { stdio: ['ignore', 'ignore', 'pipe'] });
  let output = '';
  const port = await new Promise<number>((resolve, reject) => {
    child.stderr!.setEncoding('utf8').on('data', (t: string) => {
      output += t;
      const m = /listening (\d+)/.exec(output);
      if (m) resolve(Number(m[1]));
    });
    child.once('exit', (code) => reject(new Error(`ladder rung ${rung} exited with ${code}: ${output}`)));
  });
  return {
    pid: child.pid!,
    port,
    stop: () => new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
    }),
  };
}

/**
 * Every rung is started at once (idle, they cost nothing), then measured in turns: `rounds` passes
 * over all rungs, `wrk.seconds` each, after one pass of warm-up (JIT, connections) that is not
 * counted. A busy spell of the shared machine so falls on every rung alike instead of on one; each
 * rung's CPU per request and req/s are the medians of its passes.
 */
export async function runLadder(options: {
  dataDir: string;
  secret: string;
  script: string;
  wrk: { seconds: number; connections: number; threads: number };
  rounds?: number;
  log: (text: string) => void;
}): Promise<LadderRow[]> {
  const servers: { rung: string; pid: number; port: number; stop: () => Promise<unknown> }[] = [];
  try {
    for (const rung of LADDER_RUNGS) servers.push({ rung, ...(await startRung(rung, options.dataDir, options.secret)) });
    const serve = await startServer({ dataDir: options.dataDir, args: ['--workers', '1', '--no-worker'] });
    servers.push({ rung: SERVE_RUNG, pid: serve.child.pid!, port: serve.port, stop: () => serve.stop() });
    const samples = new Map<string, LadderRow[]>(servers.map((s) => [s.rung, []]));
    const rounds = options.rounds ?? 5;
    for (let round = 0; round <= rounds; round++) {
      options.log(round === 0 ? 'ladder: warm-up pass' : `ladder: pass ${round} of ${rounds}`);
      for (const server of servers) {
        const url = `https://127.0.0.1:${server.port}`;
        const { result, threadUs, processUs } = await measureCpuPerRequest(server.pid, url, options.script, round === 0 ? { ...options.wrk, seconds: 1 } : options.wrk);
        if (round > 0) samples.get(server.rung)!.push({ rung: server.rung, rps: result.requestsPerSecond, p99Ms: result.p99Ms, non2xx: result.non2xx, threadUsPerRequest: threadUs, processUsPerRequest: processUs });
      }
    }
    return servers.map((s) => medianRow(samples.get(s.rung)!));
  } finally {
    for (const server of servers) await server.stop();
  }
}

export const SERVE_RUNG = 'serve --workers 1 --no-worker';

/** The median of each figure over a rung's passes (the lower middle one of an even count). */
export function medianRow(rows: readonly LadderRow[]): LadderRow {
  if (rows.length === 0) throw new Error('no samples');
  const median = (pick: (r: LadderRow) => number) => {
    const sorted = rows.map(pick).sort((a, b) => a - b);
    return sorted[Math.floor((sorted.length - 1) / 2)]!;
  };
  return {
    rung: rows[0]!.rung,
    rps: median((r) => r.rps),
    p99Ms: median((r) => r.p99Ms),
    non2xx: rows.reduce((n, r) => n + r.non2xx, 0),
    threadUsPerRequest: median((r) => r.threadUsPerRequest),
    processUsPerRequest: median((r) => r.processUsPerRequest),
  };
}

/** The ladder as a markdown table: each rung, and what it adds over the one before. */
export function ladderTable(rows: readonly LadderRow[]): string {
  const fmt = (n: number, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });
  const base = rows[0];
  const lines = [
    '| rung (cumulative) | req/s | vs reference | p99 ms | serving thread µs/req | added µs/req | process µs/req (all threads) | non-2xx |',
    '|---|---:|---:|---:|---:|---:|---:|---:|',
  ];
  rows.forEach((r, i) => {
    const prev = rows[i - 1];
    const added = prev && r.rung !== SERVE_RUNG ? fmt(r.threadUsPerRequest - prev.threadUsPerRequest, 1) : '-';
    lines.push(`| ${r.rung} | ${fmt(r.rps)} | ${base ? `${((r.rps / base.rps) * 100).toFixed(0)}%` : '-'} | ${fmt(r.p99Ms, 2)} | ${fmt(r.threadUsPerRequest, 1)} | ${added} | ${fmt(r.processUsPerRequest, 1)} | ${r.non2xx} |`);
  });
  return lines.join('\n');
}
