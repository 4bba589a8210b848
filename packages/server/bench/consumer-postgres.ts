/**
 * Throughput of the merged-view consumer on the PostgreSQL profile, with W `ecapi-ingest worker`
 * processes sharing one database (leased partitions), in events/s.
 *
 * Fills a fresh database's queue with the consumer workload (consumer-events.ts: ~1 KB events, five
 * identifiers, 30% re-sends, two data sets, which fall in different partitions: 2 and 15 of 16;
 * or one data set, `data-sets=1`: issue 30's one large sender), not timed; then starts W workers
 * and, once the leases are settled (every worker holds partitions), times the records applied
 * until the lag is 0. Prints one JSON line.
 *
 *   ECAPI_TEST_DATABASE_URL=$(scripts/pg-test-cluster.sh start /tmp/pg-consumer) \
 *     node packages/server/dist/bench/consumer-postgres.js [events=200000] [workers=1] [data-sets=2]
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { availableParallelism } from 'node:os';
import { openStorage } from '../src/storage/open-storage.js';
import { BIN, tempDataDir } from '../test/helpers/server-process.js';
import { freshDatabase, queryDatabase } from '../test/helpers/postgres.js';
import { appendConsumerWorkload } from './consumer-events.js';

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
  const startLag = (await reader.lag(Date.now())).lag_records;
  const started = performance.now();
  for (;;) {
    if ((await reader.lag(Date.now())).lag_records === 0) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  const seconds = (performance.now() - started) / 1000;
  console.log(JSON.stringify({
    bench: 'consumer-postgres',
    store: 'postgres',
    workers: WORKERS,
    data_sets: DATA_SETS.length,
    events: EVENTS,
    events_timed: startLag,
    seconds: Math.round(seconds * 1000) / 1000,
    events_per_second: Math.round(startLag / seconds),
    cpus: availableParallelism(),
    node: process.version,
  }));
} finally {
  for (const w of workers) w.kill('SIGTERM');
  await Promise.all(workers.map((w) => (w.exitCode === null ? once(w, 'exit') : undefined)));
  await storage.close();
}
