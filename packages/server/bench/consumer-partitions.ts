/**
 * Throughput of the merged-view consumer alone on the embedded store (SQLite), in events/s, in
 * process: the partition threads of `worker` without the process around them, with the CPU per
 * event, for before/after comparisons and profiles (`npm run bench`'s consumer-alone scenario,
 * consumer-throughput.ts, times the real `worker` process instead).
 *
 * Fills a queue with the consumer workload (consumer-events.ts: ~1 KB events, five identifiers each,
 * 30% re-sends of earlier ids, two data sets) in signed-request shape (1,000-event raw bodies, as
 * batched ingest stores them, so most go to the body log), then times the consumer draining the
 * whole backlog from offset 1. The fill is not timed. Prints one JSON line.
 *
 *   node packages/server/dist/bench/consumer-partitions.js [events=1000000] [batch=2000] [--partitions P] [--data-sets 1|2] [--hot-links N] [--per-request N] [--keep-queue DIR]
 *
 * --partitions P: view partitions, each applied by a thread of its own, as `worker --view-partitions`
 * (default: the worker's default). The two data sets fall in different partitions for P = 2 and 4.
 *
 * --data-sets N: the workload over N data sets (default 2); 1 puts every event in one data set
 * (one large sender), which one partition applies whatever P is. The queue kept by --keep-queue
 * is per N (DIR/queue-<N>ds.db).
 *
 * --hot-links N: identifier links each partition keeps in memory (`worker --view-hot-links`; 0: none;
 * default the worker's).
 *
 * --sharded: one data set on every core (issue 30): P record shards by record key and P identity
 * parts by data set, a thread each (consumer/identity-stage-applier.ts); every figure is per queued
 * record (each is applied by its shard and by its identity part).
 *
 * --per-request N: queue the workload as requests of at most N events (default: 1,000-event
 * requests, split by data set); 1 is single-event ingest, one segment per event, each its bare
 * event inline (what the default node's consumer reads under single events). The queue kept by
 * --keep-queue is then DIR/queue-<N>ds-<n>per.db.
 *
 * --keep-queue DIR: fill DIR/queue.db once and reuse it on later runs (same events), so that
 * before/after comparisons in one period skip the fill. Figures and the CPU profile: bench/README.md.
 */
import { join } from 'node:path';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir, availableParallelism } from 'node:os';
import { SqliteEventQueue } from '../src/queue/sqlite-event-queue.js';
import { SqliteViewStore } from '../src/merged-view/sqlite-view-store.js';
import { viewPartitionFile, viewShardFile } from '../src/merged-view/sqlite-view-layout.js';
import { SqlitePartitions } from '../src/consumer/sqlite-partitions.js';
import { DEFAULT_BATCH_SIZE } from '../src/consumer/view-consumer.js';
import { DEFAULT_VIEW_PARTITIONS } from '../src/consumer/sqlite-consumer.js';
import { appendConsumerWorkload } from './consumer-events.js';

const positional = process.argv.slice(2).filter((a, i, all) => !a.startsWith('--') && !(all[i - 1] ?? '').startsWith('--'));
const flag = (name: string) => {
  const at = process.argv.indexOf(name);
  return at > 0 ? process.argv[at + 1] : undefined;
};
const EVENTS = Number(positional[0] ?? 1_000_000);
const BATCH = positional[1] !== undefined ? Number(positional[1]) : undefined;
const KEEP = flag('--keep-queue');
const PARTITIONS = Number(flag('--partitions') ?? DEFAULT_VIEW_PARTITIONS);
const HOT_LINKS = flag('--hot-links') !== undefined ? Number(flag('--hot-links')) : undefined;
/** --sharded: the sharded layout (record shards + identity parts, consumer/identity-stage-applier.ts). */
const SHARDED = process.argv.includes('--sharded');
const DATA_SETS = ['ds-a', 'ds-b', 'ds-c', 'ds-d'].slice(0, Number(flag('--data-sets') ?? 2));
const PER_REQUEST = flag('--per-request') !== undefined ? Number(flag('--per-request')) : undefined;

/** Bytes this process has passed to write(2) so far (/proc/self/io wchar): WAL frames and checkpoint copies. */
const writtenBytes = () => Number(/wchar: (\d+)/.exec(readFileSync('/proc/self/io', 'utf8'))?.[1] ?? 0);

/** CPU ticks (1/100 s) of each thread of this process so far (/proc/self/task). */
function threadTicks(): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.set(tid, Number(fields[11]) + Number(fields[12]));
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

async function fillQueue(queueFile: string): Promise<void> {
  const queue = new SqliteEventQueue(queueFile);
  await appendConsumerWorkload(queue, EVENTS, 64, DATA_SETS, PER_REQUEST);
  await queue.close();
}

const dir = KEEP ?? mkdtempSync(join(tmpdir(), 'ecapi-bench-consumer-'));
try {
  mkdirSync(dir, { recursive: true });
  const queueFile = join(dir, PER_REQUEST !== undefined ? `queue-${DATA_SETS.length}ds-${PER_REQUEST}per.db` : DATA_SETS.length === 2 ? 'queue.db' : `queue-${DATA_SETS.length}ds.db`);
  const viewFile = join(dir, 'view.db');
  for (let p = 0; p < 16; p++) {
    for (const suffix of ['', '-wal', '-shm']) for (const file of [viewPartitionFile(viewFile, p), viewShardFile(viewFile, p)]) rmSync(file + suffix, { force: true });
  }
  if (!KEEP || !existsSync(queueFile)) await fillQueue(queueFile);

  const first = new SqliteViewStore(viewFile);
  first.fixLayout({ partitions: PARTITIONS, kind: SHARDED ? 'sharded' : 'data-sets' });
  await first.close();
  const partitions = new SqlitePartitions({ queueFile, viewFile, partitions: PARTITIONS, batchSize: BATCH ?? DEFAULT_BATCH_SIZE, windows: () => [], sharded: SHARDED,
    ...(HOT_LINKS !== undefined ? { hotLinks: HOT_LINKS } : {}) });
  const started = performance.now();
  const cpu0 = process.cpuUsage();
  const written0 = writtenBytes();
  const ticks0 = threadTicks();
  // Sharded: each queued record is applied once by its shard and once by its identity part.
  const applied = (await partitions.drain()) / (SHARDED ? 2 : 1);
  const ticks1 = threadTicks();
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const written = writtenBytes() - written0;
  await partitions.release();
  console.log(JSON.stringify({
    bench: 'consumer-partitions',
    store: 'sqlite',
    events: applied,
    batch_size: BATCH ?? DEFAULT_BATCH_SIZE,
    partitions: PARTITIONS,
    sharded: SHARDED,
    data_sets: DATA_SETS.length,
    ...(PER_REQUEST !== undefined ? { events_per_request: PER_REQUEST } : {}),
    seconds: Math.round(seconds * 1000) / 1000,
    events_per_second: Math.round(applied / seconds),
    // CPU of this process (all its threads) per applied event: steadier than the rate on a shared machine.
    cpu_us_per_event: Math.round(((cpu.user + cpu.system) / Math.max(1, applied)) * 10) / 10,
    // CPU of the busiest thread per event: the critical path (what bounds events/s when the other
    // threads' work fits on the other cores); 10 ms resolution.
    busiest_thread_cpu_us_per_event: Math.round((Math.max(...[...ticks1].map(([tid, t]) => t - (ticks0.get(tid) ?? 0))) * 10_000 / Math.max(1, applied)) * 10) / 10,
    // The busiest threads' CPU per event, highest first (which part bounds the rate).
    threads_cpu_us_per_event: [...ticks1].map(([tid, t]) => Math.round(((t - (ticks0.get(tid) ?? 0)) * 10_000 / Math.max(1, applied)) * 10) / 10).sort((a, b) => b - a).slice(0, 6),
    // Bytes written (WAL and checkpoints) per applied event: the I/O side of a commit, independent of load.
    written_kb_per_event: Math.round((written / 1024 / Math.max(1, applied)) * 10) / 10,
    // Peak RSS of the whole process (threads included; the queue fill is in it when it ran here).
    peak_rss_mb: Math.round(process.resourceUsage().maxRSS / 1024),
    cpus: availableParallelism(),
    node: process.version,
  }));
} finally {
  if (!KEEP) rmSync(dir, { recursive: true, force: true });
}
