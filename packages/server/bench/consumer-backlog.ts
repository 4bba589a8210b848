/**
 * The consumer alone (issue 15, item 2 of "Done when"): the real `ecapi-ingest worker` process
 * draining a backlog of realistic events on the embedded profile, reporting events/s and peak RSS.
 *
 * The backlog: `events` (default 1,000,000) ECAPI events of about 1 KB, each with five identifiers
 * (email hash, phone hash, customer id, a `uids[]` id, click id) plus an address and IP + user
 * agent, for users who come back (150,000 users per data set; 3% of the events carry a second
 * email, which links two users' identities), 30% of them re-sends of an earlier event's id (same
 * user, changed value and a new identifier sometimes), over two data sets, in 1,000-event requests
 * as batched ingest stores them (the request body kept as sent). It is written straight through
 * the queue class (SqliteEventQueue: the same writer thread and file layout as `serve`), not over
 * HTTP, so building it takes seconds and is not timed.
 *
 * Timed: from the worker's spawn until `lag_records` is 0 (polled every 250 ms from view.db and
 * queue.db, as `worker status` reads them). The worker is a black box here: whatever the consumer's
 * design (threads, shards, processes), it is measured the same way, and RSS is summed over its
 * whole process tree.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { queueDbFile, viewDbFile } from '../src/config.js';
import { DEFAULT_POLICY } from '../src/control/data-set-policy.js';
import { SqliteEventQueue } from '../src/queue/sqlite-event-queue.js';
import { bodyLogDir } from '../src/queue/sqlite-body-log.js';
import { StatsReader } from '../src/analytics/stats-reader.js';
import { openStorage } from '../src/storage/open-storage.js';
import { MAX_VIEW_PARTITIONS, viewPartitionFile, viewShardFile, type ViewLayoutKind } from '../src/merged-view/sqlite-view-layout.js';
import { BIN, cliJson, tempDataDir } from '../test/helpers/server-process.js';
import { prng } from '../test/helpers/event-generator.js';
import { processTree, sampleRss, treeCpuSeconds, treeRssMb } from './proc-stats.js';

export interface ConsumerScenarioResult {
  readonly events: number;
  readonly data_sets: number;
  readonly resend_share: number;
  readonly avg_event_bytes: number;
  readonly queue_mb: number;
  readonly build_seconds: number;
  /** Records applied when timing stopped (all of them unless max_seconds was reached). */
  readonly applied: number;
  readonly seconds: number;
  readonly events_per_second: number;
  /** CPU (user + system, every thread of the worker's process tree) per applied event, µs. */
  readonly cpu_us_per_event: number;
  /** Highest VmRSS sampled every 100 ms, summed over the worker's process tree, and its largest process (MB). */
  readonly peak_rss_mb: { sum: number; largest: number };
  /** VmHWM over the whole run, summed over the tree and largest process (MB). */
  readonly hwm_mb: { sum: number; largest: number };
  readonly view_mb: number;
  /** The view layout the worker was started with (`default`: the worker's defaults). */
  readonly layout: string;
  /** `received` over both data sets' stats equals the backlog: every record was applied once. */
  readonly all_applied: boolean;
  readonly timed_out: boolean;
}

const ALL_DATA_SETS = ['shop-web', 'shop-app'] as const;
const USERS_PER_DATA_SET = 150_000;
const REQUEST_EVENTS = 1000;
const RESEND_SHARE = 0.3;
const EVENT_TYPES = ['purchase', 'page_view', 'add_to_cart', 'purchase', 'generate_lead', 'sign_up'] as const;
const SOURCES = ['website', 'app', 'email', 'physical_store'] as const;
const CITIES = ['new york', 'paris', 'berlin', 'lyon', 'austin', 'osaka'] as const;

const sha = (text: string) => createHash('sha256').update(text).digest('hex');

/** Identifier hashes per (data set, user), computed once per user. */
class Users {
  readonly #cache = new Map<string, { email: string; phone: string; customer: string; uid: string; zip: string }>();
  of(ds: string, user: number) {
    const key = `${ds}/${user}`;
    let ids = this.#cache.get(key);
    if (!ids) {
      ids = {
        email: sha(`user${user}@${ds}.example.com`),
        phone: sha(`+1555${String(user).padStart(7, '0')}`),
        customer: sha(`customer-${ds}-${user}`),
        uid: sha(`uid-${ds}-${user}`),
        zip: sha(String(10_000 + (user % 5000))),
      };
      this.#cache.set(key, ids);
    }
    return ids;
  }
}

function backlogEvent(ds: string, serial: number, user: number, secondUser: number | null, extraPhone: boolean, rand: () => number, users: Users, nowSeconds: number): Record<string, unknown> {
  const u = users.of(ds, user);
  const email = secondUser === null ? [u.email] : [u.email, users.of(ds, secondUser).email];
  const phones = extraPhone ? [u.phone, sha(`+1666${serial}`)] : [u.phone];
  const type = EVENT_TYPES[serial % EVENT_TYPES.length]!;
  return {
    data_set_id: ds,
    id: `ord-${serial}`,
    timestamp: nowSeconds - (serial % 3600),
    event_type: type,
    ...(type === 'page_view' ? {} : { value: Math.round(rand() * 50_000) / 100, currency_code: rand() < 0.85 ? 'USD' : 'EUR' }),
    source: SOURCES[user % SOURCES.length],
    user_data: {
      email_address: email,
      phone_numbers: phones,
      customer_identifier: u.customer,
      uids: [{ id: u.uid, source: 'id.example.com', atype: 1 }],
      address: [{ postal_code: u.zip, city: CITIES[user % CITIES.length], country_code: 'us' }],
      event_ip_address: `203.0.113.${user % 250}`,
      event_user_agent: 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/120.0',
      click_id: `clk-${serial}-${Math.floor(rand() * 1e9)}`,
    },
    properties: {
      transaction_id: `tx-${serial}`,
      page_url: `https://shop.example/checkout/complete?step=${serial % 7}`,
      items: [{ id: `sku-${serial % 300}`, name: 'Trail running shoe', price: 89.5, quantity: 1 + (serial % 3) }],
    },
  };
}

/**
 * Writes the backlog into the data dir's queue through SqliteEventQueue. Returns the average event
 * size (bytes of JSON) and the share of re-sends.
 */
export async function buildBacklog(dataDir: string, events: number, seed = 15, dataSets = 2): Promise<{ avgEventBytes: number; resendShare: number }> {
  const DATA_SETS = ALL_DATA_SETS.slice(0, dataSets);
  const rand = prng(seed);
  const users = new Users();
  const queue = new SqliteEventQueue(queueDbFile(dataDir, 'production'));
  const nowSeconds = Math.floor(Date.now() / 1000);
  const t0 = Date.now() - 600_000;
  // Per data set: the user of each event serial so far (a re-send repeats one of them).
  const userOf = new Map<string, Int32Array>(DATA_SETS.map((ds) => [ds, new Int32Array(events)]));
  const serials = new Map<string, number>(DATA_SETS.map((ds) => [ds, 0]));
  const pending = new Map<string, Record<string, unknown>[]>(DATA_SETS.map((ds) => [ds, []]));
  let bytes = 0;
  let resends = 0;
  let inFlight: Promise<unknown>[] = [];
  let requestNo = 0;
  const flush = async (ds: string, at: number) => {
    const batch = pending.get(ds)!;
    if (batch.length === 0) return;
    pending.set(ds, []);
    const body = Buffer.from(JSON.stringify({ events: batch }));
    bytes += body.length;
    inFlight.push(queue.append({
      requestId: `bench-${requestNo++}`, keyId: 'key_bench', dataSetId: ds, receivedAt: at, policyVersion: 1, mergeWindowMs: DEFAULT_POLICY.mergeWindowMs,
      events: batch, metas: batch.map(() => undefined), rawBody: body,
    }));
    if (inFlight.length >= 16) {
      await Promise.all(inFlight);
      inFlight = [];
    }
  };
  for (let i = 0; i < events; i++) {
    const ds = DATA_SETS[rand() < 0.6 || DATA_SETS.length === 1 ? 0 : 1]!;
    const made = serials.get(ds)!;
    const users1 = userOf.get(ds)!;
    let event: Record<string, unknown>;
    if (made > 0 && rand() < RESEND_SHARE) {
      // A re-send of an earlier id of this data set: same user, new value, sometimes a new phone.
      const serial = Math.floor(rand() * made);
      event = backlogEvent(ds, serial, users1[serial]!, null, rand() < 0.2, rand, users, nowSeconds);
      resends++;
    } else {
      const user = Math.floor(rand() * USERS_PER_DATA_SET);
      users1[made] = user;
      serials.set(ds, made + 1);
      event = backlogEvent(ds, made, user, rand() < 0.03 ? Math.floor(rand() * USERS_PER_DATA_SET) : null, false, rand, users, nowSeconds);
    }
    pending.get(ds)!.push(event);
    // Arrivals at 50,000 events/s.
    if (pending.get(ds)!.length >= REQUEST_EVENTS) await flush(ds, t0 + Math.floor(i / 50));
  }
  for (const ds of DATA_SETS) await flush(ds, t0 + Math.floor(events / 50));
  await Promise.all(inFlight);
  await queue.close();
  return { avgEventBytes: Math.round(bytes / events), resendShare: resends / events };
}

/** Size of a file, or of the files of a directory, in MB (0 when missing). */
const fileMb = (file: string) => {
  try {
    const st = statSync(file);
    if (!st.isDirectory()) return Math.round(st.size / 2 ** 20);
    let bytes = 0;
    for (const name of readdirSync(file)) bytes += statSync(join(file, name)).size;
    return Math.round(bytes / 2 ** 20);
  } catch {
    return 0;
  }
};

/**
 * `dataSets`: 2 (default: 60% / 40%, in different view partitions) or 1 (every event in one data
 * set: one large sender, the case issue 30 is about; one partition applies it, whatever P is).
 */
export async function runConsumerScenario(
  options: { events?: number; maxSeconds?: number; log?: (line: string) => void; keep?: boolean; dataSets?: 1 | 2; layout?: { kind: ViewLayoutKind; partitions: number } } = {},
): Promise<ConsumerScenarioResult> {
  const events = options.events ?? 1_000_000;
  const DATA_SETS = ALL_DATA_SETS.slice(0, options.dataSets ?? 2);
  const maxSeconds = options.maxSeconds ?? 900;
  const log = options.log ?? (() => undefined);
  const dataDir = tempDataDir('ecapi-bench-consumer-');
  try {
    for (const ds of DATA_SETS) await cliJson(dataDir, ['data-set', 'create', ds]);
    log(`consumer: building a backlog of ${events.toLocaleString('en-US')} events...`);
    const built = performance.now();
    const { avgEventBytes, resendShare } = await buildBacklog(dataDir, events, 15, DATA_SETS.length);
    const buildSeconds = (performance.now() - built) / 1000;
    const queueMb = fileMb(queueDbFile(dataDir, 'production')) + fileMb(bodyLogDir(queueDbFile(dataDir, 'production')));
    log(`consumer: backlog built in ${buildSeconds.toFixed(1)} s (${avgEventBytes} bytes per event, ${(resendShare * 100).toFixed(1)}% re-sends); draining with \`ecapi-ingest worker\`...`);

    const storage = await openStorage({ dataDir, env: 'production', migrate: false });
    const reader = new StatsReader(storage);
    const started = performance.now();
    const worker = spawn(process.execPath, [BIN, '--data-dir', dataDir, '--env', 'production', 'worker'], {
      stdio: ['ignore', 'ignore', 'inherit'],
      env: {
        ...process.env,
        ECAPI_LOG_LEVEL: 'warn',
        ...(options.layout ? { ECAPI_VIEW_LAYOUT: options.layout.kind, ECAPI_VIEW_PARTITIONS: String(options.layout.partitions) } : {}),
      },
    });
    const stopSampling = sampleRss(worker.pid!, { relist: true });
    let applied = 0;
    let timedOut = false;
    let lastLog = started;
    let hwm = { sum: 0, largest: 0 };
    let cpuSeconds = 0;
    try {
      for (;;) {
        await new Promise((r) => setTimeout(r, 250));
        if (worker.exitCode !== null) throw new Error(`the worker exited with ${worker.exitCode}`);
        const lag = await reader.lag();
        applied = lag.next_seq - 1;
        if (lag.lag_records === 0 && lag.queue_last_seq >= events) break;
        if (performance.now() - started > maxSeconds * 1000) {
          timedOut = true;
          break;
        }
        if (performance.now() - lastLog > 10_000) {
          lastLog = performance.now();
          log(`consumer: ${applied.toLocaleString('en-US')} applied after ${((lastLog - started) / 1000).toFixed(0)} s`);
        }
      }
    } finally {
      const tree = processTree(worker.pid!);
      hwm = treeRssMb(tree, 'VmHWM');
      cpuSeconds = treeCpuSeconds(tree);
      worker.kill('SIGTERM');
      await once(worker, 'exit');
    }
    const seconds = (performance.now() - started) / 1000;
    const peak = stopSampling();
    let received = 0;
    for (const ds of DATA_SETS) received += (await reader.stats(ds, Date.now() - 7 * 86_400_000)).totals.received;
    await reader.close();
    await storage.close();
    return {
      events,
      data_sets: DATA_SETS.length,
      resend_share: Math.round(resendShare * 1000) / 1000,
      avg_event_bytes: avgEventBytes,
      queue_mb: queueMb,
      build_seconds: Math.round(buildSeconds * 10) / 10,
      applied,
      seconds: Math.round(seconds * 10) / 10,
      events_per_second: Math.round(applied / seconds),
      // From the worker's start (its start-up included) to the last record applied.
      cpu_us_per_event: Math.round((cpuSeconds * 1e6 / Math.max(1, applied)) * 10) / 10,
      peak_rss_mb: peak,
      hwm_mb: hwm,
      // Every view file (view.db, view-p<k>.db, and the sharded layout's view-s<k>.db).
      view_mb: Array.from({ length: MAX_VIEW_PARTITIONS }, (_, p) => fileMb(viewPartitionFile(viewDbFile(dataDir, 'production'), p)) + fileMb(viewShardFile(viewDbFile(dataDir, 'production'), p)))
        .reduce((a, b) => a + b, 0),
      layout: options.layout ? `${options.layout.kind}, P = ${options.layout.partitions}` : 'default',
      all_applied: !timedOut && received === events,
      timed_out: timedOut,
    };
  } finally {
    if (!options.keep) rmSync(dataDir, { recursive: true, force: true });
  }
}
