/**
 * Throughput of the merged-view consumer on the PostgreSQL profile, with W `ecapi-ingest worker`
 * processes sharing one database (leased partitions), in events/s.
 *
 * Fills a fresh database's queue with the consumer workload (consumer-events.ts: ~1 KB events, five
 * identifiers, 30% re-sends, two data sets, which fall in different partitions: 2 and 15 of 16;
 * or one data set, `data-sets=1`: issue 30's one large sender), not timed; then starts W workers
 * and, once the leases are settled (every worker holds partitions), times the records applied
 * until the lag is 0. Prints one JSON line, with the CPU over the timed span (user + system, /proc,
 * 10 ms resolution) per timed event: of the worker processes (all threads; and each one's CPU seconds), of their busiest thread
 * (the critical path of a partition's lane), and of the PostgreSQL server when it runs on this
 * machine (the postmaster's process tree, plus the children it reaped meanwhile), and the 1-minute
 * load average at the start and the end (the machine may be shared).
 *
 *   ECAPI_TEST_DATABASE_URL=$(scripts/pg-test-cluster.sh start /tmp/pg-consumer) \
 *     node packages/server/dist/bench/consumer-postgres.js [events=200000] [workers=1] [data-sets=2]
 *
 * With ECAPI_VIEW_LAYOUT=sharded (and ECAPI_VIEW_PARTITIONS=S) in the environment the workers make
 * the view in the sharded layout (merged-view/postgres-view-layout.ts: S record-shard lanes and an
 * identity lane per queue partition, leased like any lane); the line says which layout was used.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, readdirSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import { join } from 'node:path';
import { openStorage } from '../src/storage/open-storage.js';
import { BIN, tempDataDir } from '../test/helpers/server-process.js';
import { freshDatabase, queryDatabase } from '../test/helpers/postgres.js';
import { appendConsumerWorkload } from './consumer-events.js';
import { processTree, treeCpuSeconds } from './proc-stats.js';

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

/** Fields after the command name of /proc/<pid>[/task/<tid>]/stat (index 0 is field 3, `state`). */
function statFields(path: string): string[] {
  const stat = readFileSync(path, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** CPU ticks per thread of the given processes. */
function threadTicks(pids: readonly number[]): Map<string, number> {
  const ticks = new Map<string, number>();
  for (const pid of pids) {
    try {
      for (const tid of readdirSync(`/proc/${pid}/task`)) {
        const f = statFields(`/proc/${pid}/task/${tid}/stat`);
        ticks.set(`${pid}/${tid}`, Number(f[11]) + Number(f[12]));
      }
    } catch {
      // exited meanwhile
    }
  }
  return ticks;
}

/** The local PostgreSQL server's postmaster, or undefined (a remote server, no access to its files). */
async function postmasterPid(databaseUrl: string): Promise<number | undefined> {
  try {
    const rows = await queryDatabase<{ setting: string }>(databaseUrl, "SELECT setting FROM pg_settings WHERE name = 'data_directory'");
    return Number(readFileSync(join(rows[0]!.setting, 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return undefined;
  }
}

/** CPU seconds of the PostgreSQL server: its live processes and the children the postmaster reaped. */
function serverCpuSeconds(postmaster: number): number {
  const f = statFields(`/proc/${postmaster}/stat`);
  return treeCpuSeconds(processTree(postmaster)) + (Number(f[13]) + Number(f[14])) / TICKS_PER_SECOND;
}

const EVENTS = Number(process.argv[2] ?? 200_000);
const WORKERS = Number(process.argv[3] ?? 1);
const DATA_SETS = ['ds-a', 'ds-b'].slice(0, Number(process.argv[4] ?? 2));

const url = await freshDatabase('consumer_bench');
const dataDir = tempDataDir('ecapi-bench-pgc-');
const storage = await openStorage({ dataDir, env: 'production', databaseUrl: url });
const queue = storage.openQueue();
await appendConsumerWorkload(queue, EVENTS, 16, DATA_SETS);
await queue.close();

const reader = storage.queueReader();
const workers: ChildProcess[] = Array.from({ length: WORKERS }, () =>
  spawn(process.execPath, [BIN, '--data-dir', dataDir, 'worker'], { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, ECAPI_DATABASE_URL: url, ECAPI_LOG_LEVEL: 'warn' } }));
try {
  // Leases settled: W distinct owners, and nothing left unowned.
  for (;;) {
    const rows = await queryDatabase<{ owners: string; free: string }>(url, 'SELECT count(DISTINCT owner) AS owners, count(*) FILTER (WHERE owner IS NULL) AS free FROM consumer_leases');
    if (Number(rows[0]!.owners) === WORKERS && Number(rows[0]!.free) === 0) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const postmaster = await postmasterPid(url);
  const workerPids = workers.flatMap((w) => processTree(w.pid!));
  const loadStart = loadavg()[0]!;
  const startLag = (await reader.lag(Date.now())).lag_records;
  const threadsBefore = threadTicks(workerPids);
  const workersBefore = treeCpuSeconds(workerPids);
  const eachBefore = workers.map((w) => treeCpuSeconds(processTree(w.pid!)));
  const serverBefore = postmaster === undefined ? 0 : serverCpuSeconds(postmaster);
  const started = performance.now();
  for (;;) {
    if ((await reader.lag(Date.now())).lag_records === 0) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  const seconds = (performance.now() - started) / 1000;
  const workersCpu = treeCpuSeconds(workerPids) - workersBefore;
  const eachCpu = workers.map((w, i) => Math.round((treeCpuSeconds(processTree(w.pid!)) - eachBefore[i]!) * 100) / 100);
  const serverCpu = postmaster === undefined ? undefined : serverCpuSeconds(postmaster) - serverBefore;
  const layout = (await queryDatabase<{ kind: string; shards: number }>(url, 'SELECT kind, shards FROM view_layout WHERE id = 1'))[0];
  let busiest = 0;
  for (const [thread, t] of threadTicks(workerPids)) busiest = Math.max(busiest, t - (threadsBefore.get(thread) ?? 0));
  const perEvent = (cpuSeconds: number) => Math.round((cpuSeconds / startLag) * 1e7) / 10;
  console.log(JSON.stringify({
    bench: 'consumer-postgres',
    store: 'postgres',
    workers: WORKERS,
    data_sets: DATA_SETS.length,
    // ECAPI_VIEW_LAYOUT=sharded (ECAPI_VIEW_PARTITIONS: record shards per queue partition) in the workers' environment.
    layout: layout ? `${layout.kind}${layout.kind === 'sharded' ? `/${layout.shards}` : ''}` : null,
    events: EVENTS,
    events_timed: startLag,
    seconds: Math.round(seconds * 1000) / 1000,
    events_per_second: Math.round(startLag / seconds),
    workers_cpu_us_per_event: perEvent(workersCpu),
    cpu_seconds_per_worker: eachCpu,
    busiest_worker_thread_cpu_us_per_event: perEvent(busiest / TICKS_PER_SECOND),
    postgres_cpu_us_per_event: serverCpu === undefined ? null : perEvent(serverCpu),
    load_average_1m: [Math.round(loadStart * 100) / 100, Math.round(loadavg()[0]! * 100) / 100],
    cpus: availableParallelism(),
    node: process.version,
  }));
} finally {
  for (const w of workers) w.kill('SIGTERM');
  await Promise.all(workers.map((w) => (w.exitCode === null ? once(w, 'exit') : undefined)));
  await storage.close();
}
