/**
 * `npm run bench`: the service against this machine's own reference points, in one run, with the
 * same load generator (wrk, HTTP/1.1 keep-alive, TLS 1.3, loopback, bounded in time).
 *
 * References: a bare node:https server (read body, fixed 200) and the same with HMAC verification
 * and JSON.parse. The service runs with durability on (WAL, synchronous=FULL), rate limits raised
 * for the bench data set, with 1 and 2 serving processes, and once with --no-rate-limit to price
 * the limiter. Prints one table; writes bench/results/last-run.json.
 *
 * Then the asynchronous side (issue 15): `consumer`, the consumer alone draining a backlog of
 * 1,000,000 realistic events (consumer-backlog.ts), and `pipeline`, `serve` with its consumer at
 * fixed offered rates, searching the highest rate the consumer keeps up with (balanced-pipeline.ts).
 * They write bench/results/consumer-last-run.* and pipeline-last-run.*. Then `lifecycle` (issue 23):
 * the data dir's size at a fixed rate with a short retention (lifecycle-steady-state.ts).
 *
 * Env: BENCH_SECONDS (default 8) per measurement, BENCH_CONNECTIONS (50), BENCH_ONLY (comma list of
 * scenario names: single,batch100,batch1000,consumer,pipeline,lifecycle), BENCH_CONSUMER_EVENTS (1000000),
 * BENCH_CONSUMER_MAX_SECONDS (900), BENCH_CONSUMER_DATA_SETS (comma list of 1 and 2, default "1,2": the
 * consumer alone with every event in one data set, issue 30, and with two data sets), BENCH_CONSUMER_SHARDED
 * (0: no run of one data set on the sharded layout) and BENCH_CONSUMER_SHARDED_P (its partitions, default 1),
 * and the BENCH_PIPELINE_* variables of balanced-pipeline.ts
 * (BENCH_PIPELINE_SECONDS=10 for a quick run).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { availableParallelism, cpus, totalmem } from 'node:os';
import { request as httpsRequest, Agent } from 'node:https';
import Database from 'better-sqlite3';
import { cliJson, provision, startServer, tempDataDir, type ServerProcess } from '../test/helpers/server-process.js';
import { signedBodies, type SignedBody } from './bench-events.js';
import { ensureWrk, runWrk, writeWrkScript, type WrkResult } from './wrk-runner.js';
import { UNLIMITED } from './bench-service.js';
import { processTree, sampleRss, treeRssMb } from './proc-stats.js';
import { runConsumerScenario } from './consumer-backlog.js';
import { searchPipeline } from './balanced-pipeline.js';
import { runLifecycleBench } from './lifecycle-steady-state.js';
import { ladderTable, runLadder } from './ladder.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const THREADS = 2;
const DEFAULT_NODE = 'default node (serve with its defaults: consumer on)';
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
const LADDER = !only || only.includes('ladder');
const LADDER_ROUNDS = Number(process.env.BENCH_LADDER_ROUNDS ?? 5);
const LADDER_SECONDS = Number(process.env.BENCH_LADDER_SECONDS ?? 3);

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

const machine = () =>
  `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, availableParallelism ${availableParallelism()}`;
const resultsDir = () => {
  const dir = fileURLToPath(new URL('../../bench/results/', import.meta.url));
  mkdirSync(dir, { recursive: true });
  return dir;
};
const log = (text: string) => process.stderr.write(`${text}\n`);
const fmtN = (n: number | null | undefined, digits = 0) => (n === null || n === undefined || Number.isNaN(n) ? '-' : n.toLocaleString('en-US', { maximumFractionDigits: digits }));

async function consumerBench(): Promise<void> {
  const events = Number(process.env.BENCH_CONSUMER_EVENTS ?? 1_000_000);
  const shapes = (process.env.BENCH_CONSUMER_DATA_SETS ?? '1,2').split(',').map((x) => (Number(x.trim()) === 1 ? 1 : 2) as 1 | 2);
  const runs: Awaited<ReturnType<typeof runConsumerScenario>>[] = [];
  const maxSeconds = Number(process.env.BENCH_CONSUMER_MAX_SECONDS ?? 900);
  for (const dataSets of shapes) runs.push(await runConsumerScenario({ events, dataSets, maxSeconds, log }));
  // One data set on the sharded layout (worker --view-layout sharded), P = 1 on this 2-core machine:
  // one record shard and one identity part, two threads (bench/README.md, "The sharded layout in worker").
  if (shapes.includes(1) && process.env.BENCH_CONSUMER_SHARDED !== '0') {
    runs.push(await runConsumerScenario({ events, dataSets: 1, maxSeconds, log, layout: { kind: 'sharded', partitions: Number(process.env.BENCH_CONSUMER_SHARDED_P ?? 1) } }));
  }
  const first = runs[0]!;
  const lines = [
    `Consumer alone (\`ecapi-ingest worker\`, embedded profile, default view partitions unless the layout says) draining a backlog of ${fmtN(first.events)} events`,
    `(~${first.avg_event_bytes} bytes each on average, five identifiers, ~${(first.resend_share * 100).toFixed(0)}% re-sends, 1,000-event requests; the backlog is built first, not timed).`,
    `Targets (issue 30): one data set ≥ 60,000 events/s, ≤ 30 µs CPU per event, peak RSS ≤ 300 MB; two data sets ≥ 60,000 events/s.`,
    '',
    `| data sets | view layout | events applied | seconds | events/s | CPU µs/event (all threads) | peak RSS MB, all (largest process) | VmHWM MB | view MB | queue MB | every record applied once |`,
    `|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|`,
    ...runs.map((r) => `| ${r.data_sets} | ${r.layout} | ${fmtN(r.applied)} | ${r.seconds} | ${fmtN(r.events_per_second)} | ${fmtN(r.cpu_us_per_event, 1)} | ${fmtN(r.peak_rss_mb.sum)} (${fmtN(r.peak_rss_mb.largest)}) | ${fmtN(r.hwm_mb.sum)} | ${fmtN(r.view_mb)} | ${fmtN(r.queue_mb)} | ${r.all_applied ? 'yes' : r.timed_out ? 'no: stopped at BENCH_CONSUMER_MAX_SECONDS' : 'no'} |`),
    '',
    `Machine: ${machine()}.`,
  ];
  const text = lines.join('\n');
  process.stdout.write(`${text}\n`);
  writeFileSync(join(resultsDir(), 'consumer-last-run.json'), JSON.stringify({ date: new Date().toISOString(), machine: machine(), runs }, null, 2));
  writeFileSync(join(resultsDir(), 'consumer-last-run.md'), `Run of ${new Date().toISOString()}\n\n${text}\n`);
}

async function pipelineBench(): Promise<void> {
  const r = await searchPipeline(log);
  const lines = [
    `Balanced pipeline: \`serve\` (defaults, with its consumer), signed distinct 100-event batches at a fixed offered rate for ${r.seconds_per_run} s per run, lag sampled every second from /metrics.`,
    `Highest rate with lag < 5 s throughout and back to 0 within 5 s: **${fmtN(r.highest_passing_events_per_second)} events/s** (lowest failing: ${fmtN(r.lowest_failing_events_per_second)}; target 50,000: ${r.target_met ? 'met' : 'not met'}).`,
    '',
    `| offered events/s | result | seconds run | accepted events/s (to the last answer) | max lag s | max lag records | back to 0 after s | peak RSS MB, all (largest) | why |`,
    `|---:|---|---:|---:|---:|---:|---:|---:|---|`,
    ...r.runs.map((x) => `| ${fmtN(x.offered_events_per_second)} | ${x.pass ? 'pass' : 'fail'} | ${x.seconds_run} | ${fmtN(x.accepted_events_per_second)} | ${x.max_lag_seconds} | ${fmtN(x.max_lag_records)} | ${x.drain_seconds ?? '> 30'} | ${fmtN(x.peak_rss_mb.sum)} (${fmtN(x.peak_rss_mb.largest)}) | ${x.why} |`),
    '',
    `Machine: ${machine()}.`,
  ];
  const text = lines.join('\n');
  process.stdout.write(`${text}\n`);
  writeFileSync(join(resultsDir(), 'pipeline-last-run.json'), JSON.stringify({ date: new Date().toISOString(), machine: machine(), ...r }, null, 2));
  writeFileSync(join(resultsDir(), 'pipeline-last-run.md'), `Run of ${new Date().toISOString()}\n\n${text}\n`);
}

async function lifecycleBench(): Promise<void> {
  const r = await runLifecycleBench(log);
  const mb = (b: number) => fmtN(b / 1e6, 1);
  const lines = [
    `Data lifecycle: \`serve\` (with its consumer), signed distinct 100-event batches (one hashed email each) at ${fmtN(r.offered_events_per_second)} events/s for ${r.seconds} s,`,
    `view retention and queue retention ${r.retention} (retention rounds every 5 s); data dir size (allocated blocks) sampled every 5 s.`,
    '',
    `| events accepted | failed requests | bytes/event (at the first retention boundary) | steady-state size MB (last quarter) | growth first quarter (MB/s) | growth last quarter (MB/s) | records expired | retention transactions | mean / longest write-lock hold (ms) |`,
    `|---:|---:|---:|---:|---:|---:|---:|---:|---:|`,
    `| ${fmtN(r.events_accepted)} | ${fmtN(r.requests_failed)} | ${fmtN(r.bytes_per_event)} | ${mb(r.steady_state_bytes)} | ${fmtN(r.growth_bytes_per_second_first_quarter / 1e6, 3)} | ${fmtN(r.growth_bytes_per_second_last_quarter / 1e6, 3)} | ${fmtN(r.records_expired)} | ${fmtN(r.retention_transactions)} | ${fmtN(r.mean_retention_transaction_ms, 1)} / ${fmtN(r.longest_retention_transaction_ms, 1)} |`,
    '',
    `Size over time (s: MB): ${r.samples.filter((_, i) => i % 6 === 5).map((x) => `${x.t.toFixed(0)}: ${mb(x.bytes)}`).join(', ')}.`,
    '',
    `Machine: ${machine()}.`,
  ];
  const text = lines.join('\n');
  process.stdout.write(`${text}\n`);
  writeFileSync(join(resultsDir(), 'lifecycle-last-run.json'), JSON.stringify({ date: new Date().toISOString(), machine: machine(), ...r }, null, 2));
  writeFileSync(join(resultsDir(), 'lifecycle-last-run.md'), `Run of ${new Date().toISOString()}\n\n${text}\n`);
}

async function main(): Promise<void> {
  if (SCENARIOS.length > 0 || LADDER) await ingestBench();
  if (!only || only.includes('consumer')) await consumerBench();
  if (!only || only.includes('pipeline')) await pipelineBench();
  if (!only || only.includes('lifecycle')) await lifecycleBench();
}

async function ingestBench(): Promise<void> {
  ensureWrk();
  const dataDir = tempDataDir('ecapi-bench-');
  try {
    await ingestBenchIn(dataDir);
  } finally {
    // The queue of every run above, 6-8 GB on this machine: never left behind in the temp dir.
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function ingestBenchIn(dataDir: string): Promise<void> {
  const creds = await provision(dataDir, [DS]);
  await cliJson(dataDir, ['data-set', 'limits', DS, ...UNLIMITED]);
  // Let the service generate the TLS material the references reuse.
  await (await startServer({ dataDir, args: ['--workers', '1', '--no-worker'] })).stop();

  const scripts = new Map<string, string>();
  const bodiesByScenario = new Map<string, SignedBody[]>();
  const wanted = LADDER && !SCENARIOS.some((s) => s.name === 'single') ? [ALL_SCENARIOS[0]!, ...SCENARIOS] : SCENARIOS;
  for (const s of wanted) {
    const bodies = signedBodies(DS, creds.secret, s.events, s.bodies);
    bodiesByScenario.set(s.name, bodies);
    scripts.set(s.name, writeWrkScript(dataDir, s.name, bodies, creds.keyId, DS));
  }
  if (LADDER) {
    const ladder = await runLadder({ dataDir, secret: creds.secret, script: scripts.get('single')!, wrk: { seconds: LADDER_SECONDS, connections: CONNECTIONS, threads: THREADS }, rounds: LADDER_ROUNDS, log });
    const text = [
      ladderTable(ladder),
      '',
      `Machine: ${machine()}. every rung started at once, then measured in turn: ${LADDER_ROUNDS} passes of wrk -t${THREADS} -c${CONNECTIONS} -d${LADDER_SECONDS}s over all rungs after a 1 s warm-up pass; each figure is the median of its passes; single events, HTTP/1.1 over TLS 1.3, loopback. CPU from /proc/<pid>/task/<tid>/schedstat over the wrk run.`,
    ].join('\n');
    process.stdout.write(`${text}\n`);
    writeFileSync(join(resultsDir(), 'ladder-last-run.json'), JSON.stringify({ date: new Date().toISOString(), machine: machine(), seconds: SECONDS, connections: CONNECTIONS, rows: ladder }, null, 2));
    writeFileSync(join(resultsDir(), 'ladder-last-run.md'), `Run of ${new Date().toISOString()}\n\n${text}\n`);
  }
  if (SCENARIOS.length === 0) return;
  const rows: Row[] = [];

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
    // What `npm start` runs: the default number of serving processes and the merged-view consumer,
    // which drains what ingestion accepts on the same cores (issue 17). Its process tree grows
    // after start (the consumer), so RSS is sampled with the tree listed again every second.
    { label: DEFAULT_NODE, args: [] },
    { label: 'service, 2 processes, consumer on', args: ['--workers', '2'] },
  ];
  let p99At1000: Awaited<ReturnType<typeof fixedRate>> | null = null;
  let p99At1000DefaultNode: Awaited<ReturnType<typeof fixedRate>> | null = null;
  const peakOfRun: string[] = [];
  for (const service of services) {
    const server: ServerProcess = await startServer({ dataDir, args: service.args });
    const before = queuedEvents(dataDir);
    let accepted = 0;
    const scenarios = service.label.includes('no limiter') ? SCENARIOS.filter((s) => s.name === 'single') : SCENARIOS;
    for (const s of scenarios) {
      log(`${service.label} ${s.name}...`);
      const stopSampling = sampleRss(server.child.pid!, { relist: !service.args.includes('--no-worker') });
      const r = row(service.label, s, await runWrk(`https://127.0.0.1:${server.port}`, scripts.get(s.name)!, { seconds: SECONDS, connections: CONNECTIONS, threads: THREADS }));
      r.rss = stopSampling();
      accepted += r.eventsPerSecond * SECONDS;
      rows.push(r);
    }
    if (service.label === 'service, 1 process' && bodiesByScenario.has('single')) {
      log('service, 1 process: p99 at 1,000 req/s offered...');
      p99At1000 = await fixedRate(server.port, server.ca, bodiesByScenario.get('single')!, creds.keyId, 1000, 5);
    }
    if (service.label === DEFAULT_NODE && bodiesByScenario.has('single')) {
      log(`${DEFAULT_NODE}: p99 at 1,000 req/s offered...`);
      p99At1000DefaultNode = await fixedRate(server.port, server.ca, bodiesByScenario.get('single')!, creds.keyId, 1000, 5);
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
  const machineText = machine();
  const summary = [
    '',
    `Machine: ${machineText}. wrk -t${THREADS} -c${CONNECTIONS} -d${SECONDS}s, HTTP/1.1 over TLS 1.3, loopback; durability on (WAL, synchronous=FULL).`,
    p99At1000 ? `Single events at 1,000 req/s offered (service, 1 process): p50 ${fmt(p99At1000.p50Ms, 2)} ms, p99 ${fmt(p99At1000.p99Ms, 2)} ms over ${p99At1000.count} requests, ${p99At1000.failures} failures.` : '',
    p99At1000DefaultNode ? `Single events at 1,000 req/s offered (${DEFAULT_NODE}): p50 ${fmt(p99At1000DefaultNode.p50Ms, 2)} ms, p99 ${fmt(p99At1000DefaultNode.p99Ms, 2)} ms over ${p99At1000DefaultNode.count} requests, ${p99At1000DefaultNode.failures} failures.` : '',
    `Peak RSS over each whole service run (VmHWM): ${peakOfRun.join('; ')}.`,
    limited && unlimited ? `Rate limiter cost, single events: ${fmt(limited.rps)} req/s with it, ${fmt(unlimited.rps)} without (${(((unlimited.rps - limited.rps) / unlimited.rps) * 100).toFixed(1)}% fewer).` : '',
  ];
  const table = [...lines, ...summary].join('\n');
  process.stdout.write(`${table}\n`);
  writeFileSync(join(resultsDir(), 'last-run.json'), JSON.stringify({ date: new Date().toISOString(), machine: machineText, seconds: SECONDS, connections: CONNECTIONS, rows, p99At1000, p99At1000DefaultNode }, null, 2));
  writeFileSync(join(resultsDir(), 'last-run.md'), `Run of ${new Date().toISOString()}\n\n${table}\n`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`bench failed: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  },
);
