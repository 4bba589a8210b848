/**
 * Data lifecycle (issue 23): `serve` with its consumer, offered a FIXED rate of signed, distinct
 * 100-event batches (one hashed email each, 4,096 returning users) for several minutes, with a short
 * view retention and queue retention set for the bench; the data dir's size (every file under the
 * environment directory, allocated blocks) is sampled every 5 s.
 *
 * What it shows: before retention applies the data dir grows at (events/s × bytes per event); once
 * the oldest records pass the retention, the workers delete as much as comes in and the freed pages
 * are reused, so the size levels off at about (events/s × bytes per event × retention).
 *
 * Reported: bytes per event (size at the first retention boundary / events accepted by then), the
 * steady-state size (mean of the last quarter), and the growth rate (bytes/s, least squares) of the
 * first and of the last quarter.
 *
 * Env: BENCH_LIFECYCLE_SECONDS (300), BENCH_LIFECYCLE_RATE (2000 events/s), BENCH_LIFECYCLE_RETENTION
 * (60s: both the view retention and `worker --retention`).
 */
import { createHash } from 'node:crypto';
import { lstatSync, readdirSync, rmSync } from 'node:fs';
import { Agent } from 'node:https';
import { join } from 'node:path';
import { parseDurationMs } from '../src/control/duration.js';
import { cliJson, provision, startServer, tempDataDir } from '../test/helpers/server-process.js';
import { UNLIMITED } from './bench-service.js';
import { postBody } from './balanced-pipeline.js';

const DS = 'bench';
const EVENTS_PER_REQUEST = 100;

const sha = (text: string) => createHash('sha256').update(text).digest('hex');

/** Allocated bytes of every file under `dir`. */
export function allocatedBytes(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) total += allocatedBytes(path);
    else if (entry.isFile()) total += lstatSync(path).blocks * 512;
  }
  return total;
}

function bodyOf(run: string, i: number): Buffer {
  const now = Math.floor(Date.now() / 1000);
  const events = Array.from({ length: EVENTS_PER_REQUEST }, (_, j) => ({
    data_set_id: DS,
    id: `${run}-${i}-${j}`,
    timestamp: now,
    event_type: 'purchase',
    value: 10 + (j % 90),
    currency_code: 'USD',
    source: 'website',
    user_data: { email_address: [sha(`user-${(i * EVENTS_PER_REQUEST + j) % 4096}`)] },
  }));
  return Buffer.from(JSON.stringify({ events }));
}

/** Least-squares slope of (t seconds, bytes). */
function slope(points: readonly { t: number; bytes: number }[]): number {
  const n = points.length;
  if (n < 2) return 0;
  const mt = points.reduce((a, p) => a + p.t, 0) / n;
  const mb = points.reduce((a, p) => a + p.bytes, 0) / n;
  const num = points.reduce((a, p) => a + (p.t - mt) * (p.bytes - mb), 0);
  const den = points.reduce((a, p) => a + (p.t - mt) ** 2, 0);
  return den === 0 ? 0 : num / den;
}

export interface LifecycleBenchResult {
  readonly offered_events_per_second: number;
  readonly seconds: number;
  readonly retention: string;
  readonly events_accepted: number;
  readonly requests_failed: number;
  readonly bytes_per_event: number;
  readonly steady_state_bytes: number;
  readonly growth_bytes_per_second_first_quarter: number;
  readonly growth_bytes_per_second_last_quarter: number;
  /** Longest single retention transaction logged by the worker (ms): what a consumer batch may wait for. */
  readonly longest_retention_transaction_ms: number | null;
  readonly mean_retention_transaction_ms: number | null;
  readonly retention_transactions: number;
  readonly records_expired: number;
  readonly samples: { t: number; bytes: number; accepted: number }[];
}

export async function runLifecycleBench(log: (line: string) => void = () => undefined): Promise<LifecycleBenchResult> {
  const seconds = Number(process.env.BENCH_LIFECYCLE_SECONDS ?? 300);
  const rate = Number(process.env.BENCH_LIFECYCLE_RATE ?? 2000);
  const retention = process.env.BENCH_LIFECYCLE_RETENTION ?? '60s';
  const retentionMs = parseDurationMs(retention);
  const dataDir = tempDataDir('ecapi-bench-lifecycle-');
  const creds = await provision(dataDir, [DS]);
  await cliJson(dataDir, ['data-set', 'limits', DS, ...UNLIMITED]);
  // The retention may not be shorter than the merge window or the maximum event age.
  await cliJson(dataDir, ['data-set', 'policy', DS, '--merge-window', retention, '--max-age', retention, '--view-retention', retention]);
  const server = await startServer({
    dataDir,
    extraEnv: { ECAPI_QUEUE_RETENTION: retention, ECAPI_VIEW_RETENTION_EVERY: '5s', ECAPI_QUEUE_RETENTION_EVERY: '5s' },
    args: ['--workers', '1'],
  });
  const envDir = join(dataDir, 'production');
  const agent = new Agent({ keepAlive: true, maxSockets: 16, ca: server.ca, minVersion: 'TLSv1.3' });
  const run = Date.now().toString(36);
  let accepted = 0;
  let failed = 0;
  const samples: { t: number; bytes: number; accepted: number }[] = [];
  const started = performance.now();
  const sampler = setInterval(() => {
    const t = (performance.now() - started) / 1000;
    samples.push({ t, bytes: allocatedBytes(envDir), accepted });
    if (samples.length % 6 === 0) log(`  t=${t.toFixed(0)}s data dir ${(samples[samples.length - 1]!.bytes / 1e6).toFixed(1)} MB, ${accepted} events accepted`);
  }, 5000);
  const requestsPerSecond = rate / EVENTS_PER_REQUEST;
  const total = Math.round(requestsPerSecond * seconds);
  const inFlight = new Set<Promise<void>>();
  try {
    for (let i = 0; i < total; i++) {
      const due = started + (i * 1000) / requestsPerSecond;
      const wait = due - performance.now();
      if (wait > 1) await new Promise((r) => setTimeout(r, wait));
      const p = new Promise<void>((resolve) =>
        postBody(agent, server.port, creds, DS, bodyOf(run, i), (status) => {
          if (status === 200) accepted += EVENTS_PER_REQUEST;
          else failed++;
          resolve();
        }),
      );
      inFlight.add(p);
      void p.then(() => inFlight.delete(p));
    }
    await Promise.all(inFlight);
  } finally {
    clearInterval(sampler);
    agent.destroy();
    await server.stop();
  }
  let longest: number | null = null;
  let expired = 0;
  let transactions = 0;
  let heldMs = 0;
  for (const line of server.output().split('\n')) {
    if (!line.includes('"msg":"view retention"')) continue;
    const entry = JSON.parse(line) as { longest_transaction_ms: number; mean_transaction_ms: number; transactions: number; deleted_records: number };
    longest = Math.max(longest ?? 0, entry.longest_transaction_ms);
    expired += entry.deleted_records;
    transactions += entry.transactions;
    heldMs += entry.mean_transaction_ms * entry.transactions;
  }
  // Bytes per event: the size when the first events reach the retention, over the events by then.
  const boundary = samples.find((s) => s.t * 1000 >= retentionMs) ?? samples[samples.length - 1]!;
  const quarter = Math.max(2, Math.floor(samples.length / 4));
  const last = samples.slice(-quarter);
  const result: LifecycleBenchResult = {
    offered_events_per_second: rate,
    seconds,
    retention,
    events_accepted: accepted,
    requests_failed: failed,
    bytes_per_event: Math.round(boundary.bytes / Math.max(1, boundary.accepted)),
    steady_state_bytes: Math.round(last.reduce((a, s) => a + s.bytes, 0) / last.length),
    growth_bytes_per_second_first_quarter: Math.round(slope(samples.slice(0, quarter))),
    growth_bytes_per_second_last_quarter: Math.round(slope(last)),
    longest_retention_transaction_ms: longest,
    mean_retention_transaction_ms: transactions > 0 ? Math.round((heldMs / transactions) * 10) / 10 : null,
    retention_transactions: transactions,
    records_expired: expired,
    samples,
  };
  rmSync(dataDir, { recursive: true, force: true });
  return result;
}
