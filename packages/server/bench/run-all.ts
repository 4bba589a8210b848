/**
 * `npm run bench`: the service against this machine's own reference points, in one run, with the
 * same load generator (wrk, HTTP/1.1 keep-alive, TLS 1.3, loopback, bounded in time).
 *
 * References: a bare node:https server (read body, fixed 200) and the same with HMAC verification
 * and JSON.parse. The service runs with durability on (WAL, synchronous=FULL), rate limits raised
 * for the bench data set, with 1 and 2 serving processes, and once with --no-rate-limit to price
 * the limiter. Prints one table; writes bench/results/last-run.json.
 *
 * Env: BENCH_SECONDS (default 8) per measurement, BENCH_CONNECTIONS (50), BENCH_ONLY (comma list of
 * scenario names: single,batch100,batch1000).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { availableParallelism, cpus, totalmem } from 'node:os';
import { request as httpsRequest, Agent } from 'node:https';
import Database from 'better-sqlite3';
import { cliJson, provision, startServer, tempDataDir, type ServerProcess } from '../test/helpers/server-process.js';
import { signedBodies, type SignedBody } from './bench-events.js';
import { ensureWrk, runWrk, writeWrkScript, type WrkResult } from './wrk-runner.js';
import { UNLIMITED } from './bench-service.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const THREADS = 2;
const DS = 'bench';

interface Scenario {
  readonly name: string;
  readonly events: number;
  readonly bodies: number;
}
const ALL_SCENARIOS: Scenario[] = [
  { name: 'single', events: 1, bodies: 20_000 },
  { name: 'batch100', events: 100, bodies: 300 },
  { name: 'batch1000', events: 1000, bodies: 40 },
];
const only = process.env.BENCH_ONLY?.split(',');
const SCENARIOS = ALL_SCENARIOS.filter((s) => !only || only.includes(s.name));

interface Row {
  target: string;
  scenario: string;
  rps: number;
  eventsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  /** Highest RSS sampled during this scenario: summed over the service's processes, and its largest process. */
  rss?: { sum: number; largest: number };
}

/** A process and its descendants. */
function processTree(pid: number): number[] {
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
function treeRssMb(pids: readonly number[], field: 'VmRSS' | 'VmHWM'): { sum: number; largest: number } {
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

/**
 * Samples the tree's RSS every 100 ms until stopped; returns the highest sum and largest process
 * seen. The tree is listed once (scanning /proc every sample would take CPU from the service).
 */
function sampleRss(pid: number): () => { sum: number; largest: number } {
  const peak = { sum: 0, largest: 0 };
  const pids = processTree(pid);
  const timer = setInterval(() => {
    const now = treeRssMb(pids, 'VmRSS');
    peak.sum = Math.max(peak.sum, now.sum);
    peak.largest = Math.max(peak.largest, now.largest);
  }, 100);
  return () => {
    clearInterval(timer);
    return peak;
  };
}

async function startReference(mode: 'bare' | 'hmac', dataDir: string, secret: string): Promise<{ child: ChildProcess; port: number }> {
  const script = fileURLToPath(new URL('./reference-server.js', import.meta.url));
  const child = spawn(process.execPath, [script, mode, '0', join(dataDir, 'tls', 'localhost-cert.pem'), join(dataDir, 'tls', 'localhost-key.pem'), secret], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve) => {
    child.stdout!.setEncoding('utf8').on('data', (t: string) => {
      const m = /listening (\d+)/.exec(t);
      if (m) resolve(Number(m[1]));
    });
  });
  return { child, port };
}

function row(target: string, scenario: Scenario, r: WrkResult): Row {
  const ok = r.totalRequests > 0 ? (r.totalRequests - r.non2xx) / r.totalRequests : 0;
  return {
    target,
    scenario: scenario.name,
    rps: r.requestsPerSecond,
    eventsPerSecond: r.requestsPerSecond * ok * scenario.events,
    p50Ms: r.p50Ms,
    p99Ms: r.p99Ms,
    non2xx: r.non2xx,
  };
}

/**
 * Offers `rate` single-event requests per second for `seconds`; returns latency percentiles of the
 * steady state. The first second is a warm-up that is not recorded: it opens the keep-alive TLS
 * connections and warms up the JIT of both sides, which otherwise dominate the tail.
 */
async function fixedRate(port: number, ca: string, bodies: readonly SignedBody[], keyId: string, rate: number, seconds: number) {
  const agent = new Agent({ keepAlive: true, maxSockets: 64, ca, minVersion: 'TLSv1.3' });
  const latencies: number[] = [];
  let failures = 0;
  const started = performance.now();
  const warmup = rate;
  const total = rate * (seconds + 1);
  const inFlight: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const due = started + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    const b = bodies[i % bodies.length]!;
    const t0 = performance.now();
    inFlight.push(
      new Promise<void>((resolve) => {
        const req = httpsRequest(
          {
            host: '127.0.0.1', servername: 'localhost', port, agent, method: 'POST', path: '/v1/events',
            headers: { 'content-type': 'application/json', accept: 'application/json', 'x-service-key-id': keyId, 'x-service-data-set': DS, 'x-service-signature': b.signature, 'content-length': Buffer.byteLength(b.body) },
          },
          (res) => {
            res.resume();
            res.on('end', () => {
              if (res.statusCode !== 200) failures++;
              else if (i >= warmup) latencies.push(performance.now() - t0);
              resolve();
            });
          },
        );
        req.on('error', () => {
          failures++;
          resolve();
        });
        req.end(b.body);
      }),
    );
  }
  await Promise.all(inFlight);
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? Number.NaN;
  return { p50Ms: pct(50), p99Ms: pct(99), failures, count: latencies.length };
}

function queuedEvents(dataDir: string): number {
  const db = new Database(join(dataDir, 'production', 'queue.db'), { readonly: true });
  try {
    return (db.prepare('SELECT COALESCE(SUM(event_count), 0) AS n FROM queue_segments').get() as { n: number }).n;
  } finally {
    db.close();
  }
}

async function main(): Promise<void> {
  ensureWrk();
  const dataDir = tempDataDir('ecapi-bench-');
  const creds = await provision(dataDir, [DS]);
  await cliJson(dataDir, ['data-set', 'limits', DS, ...UNLIMITED]);
  // Let the service generate the TLS material the references reuse.
  await (await startServer({ dataDir, args: ['--workers', '1', '--no-worker'] })).stop();

  const scripts = new Map<string, string>();
  const bodiesByScenario = new Map<string, SignedBody[]>();
  for (const s of SCENARIOS) {
    const bodies = signedBodies(DS, creds.secret, s.events, s.bodies);
    bodiesByScenario.set(s.name, bodies);
    scripts.set(s.name, writeWrkScript(dataDir, s.name, bodies, creds.keyId, DS));
  }
  const rows: Row[] = [];
  const log = (text: string) => process.stderr.write(`${text}\n`);

  for (const mode of ['bare', 'hmac'] as const) {
    const ref = await startReference(mode, dataDir, creds.secret);
    for (const s of SCENARIOS) {
      log(`reference ${mode} ${s.name}...`);
      rows.push(row(`node:https ${mode === 'bare' ? 'bare' : 'HMAC+parse'}`, s, await runWrk(`https://127.0.0.1:${ref.port}`, scripts.get(s.name)!, { seconds: SECONDS, connections: CONNECTIONS, threads: THREADS })));
    }
    ref.child.kill('SIGTERM');
  }

  const services: { label: string; args: string[] }[] = [
    // --no-worker: the merged-view consumer would drain the queue on the same 2 cores; this
    // measures ingestion (bench/consumer-throughput.ts measures the consumer).
    { label: 'service, 1 process', args: ['--workers', '1', '--no-worker'] },
    { label: 'service, 2 processes', args: ['--workers', '2', '--no-worker'] },
    { label: 'service, 1 process, no limiter', args: ['--workers', '1', '--no-worker', '--no-rate-limit'] },
  ];
  let p99At1000: Awaited<ReturnType<typeof fixedRate>> | null = null;
  const peakOfRun: string[] = [];
  for (const service of services) {
    const server: ServerProcess = await startServer({ dataDir, args: service.args });
    const before = queuedEvents(dataDir);
    let accepted = 0;
    const scenarios = service.label.includes('no limiter') ? SCENARIOS.filter((s) => s.name === 'single') : SCENARIOS;
    for (const s of scenarios) {
      log(`${service.label} ${s.name}...`);
      const stopSampling = sampleRss(server.child.pid!);
      const r = row(service.label, s, await runWrk(`https://127.0.0.1:${server.port}`, scripts.get(s.name)!, { seconds: SECONDS, connections: CONNECTIONS, threads: THREADS }));
      r.rss = stopSampling();
      accepted += r.eventsPerSecond * SECONDS;
      rows.push(r);
    }
    if (service.label === 'service, 1 process' && bodiesByScenario.has('single')) {
      log('service, 1 process: p99 at 1,000 req/s offered...');
      p99At1000 = await fixedRate(server.port, server.ca, bodiesByScenario.get('single')!, creds.keyId, 1000, 5);
    }
    const hwm = treeRssMb(processTree(server.child.pid!), 'VmHWM');
    peakOfRun.push(`${service.label}: ${hwm.sum} MB summed over its processes, ${hwm.largest} MB its largest process`);
    await server.stop();
    const queued = queuedEvents(dataDir) - before;
    log(`${service.label}: ${queued} events queued (wrk counted about ${Math.round(accepted)} accepted)`);
  }

  // The table.
  const ref = (target: string, scenario: string) => rows.find((r) => r.target === target && r.scenario === scenario);
  const fmt = (n: number | undefined, digits = 0) => (n === undefined || Number.isNaN(n) ? '-' : n.toLocaleString('en-US', { maximumFractionDigits: digits }));
  const lines = [
    `| target | scenario | req/s | events/s | p50 ms | p99 ms | vs bare | vs HMAC+parse | peak RSS MB, all (largest process) | non-2xx |`,
    `|---|---|---:|---:|---:|---:|---:|---:|---:|---:|`,
  ];
  for (const r of rows) {
    const bare = ref('node:https bare', r.scenario);
    const hmac = ref('node:https HMAC+parse', r.scenario);
    const ratio = (b?: Row) => (b && b.rps > 0 ? `${((r.rps / b.rps) * 100).toFixed(0)}%` : '-');
    lines.push(`| ${r.target} | ${r.scenario} | ${fmt(r.rps)} | ${fmt(r.eventsPerSecond)} | ${fmt(r.p50Ms, 2)} | ${fmt(r.p99Ms, 2)} | ${ratio(bare)} | ${ratio(hmac)} | ${r.rss ? `${fmt(r.rss.sum)} (${fmt(r.rss.largest)})` : '-'} | ${fmt(r.non2xx)} |`);
  }
  const limited = ref('service, 1 process', 'single');
  const unlimited = ref('service, 1 process, no limiter', 'single');
  const machine = `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, availableParallelism ${availableParallelism()}`;
  const summary = [
    '',
    `Machine: ${machine}. wrk -t${THREADS} -c${CONNECTIONS} -d${SECONDS}s, HTTP/1.1 over TLS 1.3, loopback; durability on (WAL, synchronous=FULL).`,
    p99At1000 ? `Single events at 1,000 req/s offered (service, 1 process): p50 ${fmt(p99At1000.p50Ms, 2)} ms, p99 ${fmt(p99At1000.p99Ms, 2)} ms over ${p99At1000.count} requests, ${p99At1000.failures} failures.` : '',
    `Peak RSS over each whole service run (VmHWM): ${peakOfRun.join('; ')}.`,
    limited && unlimited ? `Rate limiter cost, single events: ${fmt(limited.rps)} req/s with it, ${fmt(unlimited.rps)} without (${(((unlimited.rps - limited.rps) / unlimited.rps) * 100).toFixed(1)}% fewer).` : '',
  ];
  const table = [...lines, ...summary].join('\n');
  process.stdout.write(`${table}\n`);
  const resultsDir = fileURLToPath(new URL('../../bench/results/', import.meta.url));
  mkdirSync(resultsDir, { recursive: true });
  writeFileSync(join(resultsDir, 'last-run.json'), JSON.stringify({ date: new Date().toISOString(), machine, seconds: SECONDS, connections: CONNECTIONS, rows, p99At1000 }, null, 2));
  writeFileSync(join(resultsDir, 'last-run.md'), `Run of ${new Date().toISOString()}\n\n${table}\n`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`bench failed: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  },
);
