/**
 * The crash loop, shared by the CI test (test/reliability/crash-loop.test.ts) and the long run
 * (test-faults/crash-loop.test.ts, `npm run test:faults`).
 *
 * Several senders post batches continuously; each logical request has fixed event ids and is
 * retried until it is answered 200 (500 and network errors are retried, as the spec allows). The
 * whole server (primary, serving workers, consumer) is SIGKILLed at random moments and restarted.
 * Afterwards: every event answered 200 is in the queue; every event sent is there at least once;
 * the merged view, built by running `ecapi-ingest worker` to completion, holds each
 * (data_set_id, id) exactly once and counts every queued copy.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { BIN, cli, cliJson, exportQueue, provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import { postSigned, sampleEvent, type HttpResult } from '../helpers/https-client.js';
import { killTree, waitFor } from '../helpers/fault-tools.js';

export interface CrashLoopOptions {
  readonly kills: number;
  readonly senders: number;
  /** The server is killed after a uniformly random time in [minUpMs, maxUpMs] of load. */
  readonly minUpMs: number;
  readonly maxUpMs: number;
  readonly workers: number;
  /** Run the merged-view consumer inside `serve` during the loop (it gets killed too). */
  readonly consumerDuringLoop: boolean;
  readonly seed?: number;
  readonly log?: (line: string) => void;
}

export interface CrashLoopFigures {
  kills: number;
  /** HTTP requests sent, retries included. */
  requestsSent: number;
  /** Requests answered 200, and the events in them. */
  requestsAcknowledged: number;
  eventsAcknowledged: number;
  /** Requests answered 500, and requests never answered (connection refused or cut by a kill). */
  answered500: number;
  neverAnswered: number;
  /** Distinct events (ids) the senders generated; each was eventually acknowledged. */
  distinctEvents: number;
  /** Acknowledged events found in the queue afterwards, and those missing (must be 0). */
  acknowledgedFound: number;
  lost: number;
  /** Queue records of the data set (>= distinctEvents: an unanswered request may have committed). */
  queueRecords: number;
  duplicateQueueRecords: number;
  /** Merged-view records and (data_set_id, id) pairs held more than once (must be 0). */
  mergedRecords: number | null;
  mergedDuplicates: number | null;
}

const DS = 'crash';

/** Small deterministic PRNG (mulberry32) so that a failing run can be replayed with its seed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('timed out')), ms);
    promise.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}

export async function runCrashLoop(options: CrashLoopOptions): Promise<CrashLoopFigures> {
  const log = options.log ?? (() => {});
  const seed = options.seed ?? Date.now() % 1_000_000;
  log(`crash loop seed ${seed}`);
  const random = prng(seed);
  const dataDir = tempDataDir('ecapi-crash-');
  const creds = await provision(dataDir, [DS]);
  const serverArgs = ['--workers', String(options.workers), ...(options.consumerDuringLoop ? [] : ['--no-worker'])];

  const figures: CrashLoopFigures = {
    kills: 0, requestsSent: 0, requestsAcknowledged: 0, eventsAcknowledged: 0, answered500: 0, neverAnswered: 0,
    distinctEvents: 0, acknowledgedFound: 0, lost: 0, queueRecords: 0, duplicateQueueRecords: 0,
    mergedRecords: null, mergedDuplicates: null,
  };
  const acknowledged = new Set<string>();
  const generated = new Set<string>();
  const unexpected: string[] = [];

  let current: ServerProcess | null = null;
  let generating = true;

  const sender = async (index: number) => {
    for (let n = 0; generating; n++) {
      // One request in ten is a batch large enough (~50 KB) for the queue's body log, so kills
      // also land between a body's write, its sync and the commit that points at it.
      const size = random() < 0.1 ? 200 : 1 + Math.floor(random() * 12);
      const events = Array.from({ length: size }, (_, j) => sampleEvent(DS, { id: `c${index}-${n}-${j}` }));
      for (const e of events) generated.add(e.id as string);
      const body = JSON.stringify(size === 1 && random() < 0.5 ? events[0] : { events });
      // Retry until 200: the spec's sender behaviour on 500, time-outs and network errors.
      for (;;) {
        const server = current;
        if (!server) {
          await new Promise((r) => setTimeout(r, 20));
          continue;
        }
        figures.requestsSent++;
        let res: HttpResult;
        try {
          res = await withTimeout(postSigned(server.port, server.ca, creds, DS, body, { http2: index % 2 === 1 }), 15_000);
        } catch {
          figures.neverAnswered++;
          await new Promise((r) => setTimeout(r, 10 + random() * 40));
          continue;
        }
        if (res.status === 0) {
          // The stream ended without a response (HTTP/2 session torn down by the kill): unanswered.
          figures.neverAnswered++;
          continue;
        }
        if (res.status === 200) {
          assert.deepEqual(res.json(), { accepted: size });
          figures.requestsAcknowledged++;
          figures.eventsAcknowledged += size;
          for (const e of events) acknowledged.add(e.id as string);
          break;
        }
        if (res.status === 500) {
          assert.deepEqual(res.json(), { error: 'ingest backend unavailable' });
          figures.answered500++;
          continue;
        }
        unexpected.push(`${res.status} ${res.text}`);
        break;
      }
    }
  };

  current = await startServer({ dataDir, args: serverArgs });
  const senders = Array.from({ length: options.senders }, (_, i) => sender(i));
  try {
    for (let k = 0; k < options.kills; k++) {
      const upMs = options.minUpMs + random() * (options.maxUpMs - options.minUpMs);
      await new Promise((r) => setTimeout(r, upMs));
      const victim: ServerProcess = current!;
      const exited = once(victim.child, 'exit');
      killTree(victim.child.pid!);
      await exited;
      current = null;
      figures.kills++;
      current = await startServer({ dataDir, args: serverArgs });
      if ((k + 1) % 10 === 0) log(`${k + 1} kills, ${figures.requestsAcknowledged} requests acknowledged so far`);
    }
    // Let the load run on the last server, then let every sender finish its request.
    await new Promise((r) => setTimeout(r, options.maxUpMs));
    generating = false;
    await Promise.all(senders);
  } finally {
    generating = false;
    if (current) assert.equal(await (current as ServerProcess).stop('SIGTERM'), 0, 'the last server exits 0 on SIGTERM');
  }
  assert.deepEqual(unexpected, [], 'only 200 and 500 answers');

  // The queue file is intact after all those kills.
  const db = new Database(join(dataDir, 'production', 'queue.db'), { readonly: true });
  assert.equal((db.pragma('integrity_check', { simple: true }) as string), 'ok');
  db.close();

  const records = (await exportQueue(dataDir)).filter((r) => r.data_set_id === DS);
  const counts = new Map<string, number>();
  for (const r of records) counts.set(r.event.id, (counts.get(r.event.id) ?? 0) + 1);
  figures.queueRecords = records.length;
  figures.duplicateQueueRecords = records.length - counts.size;
  figures.distinctEvents = generated.size;
  figures.acknowledgedFound = [...acknowledged].filter((id) => counts.has(id)).length;
  figures.lost = acknowledged.size - figures.acknowledgedFound;
  assert.equal(figures.lost, 0, 'no acknowledged event is lost');
  assert.equal(acknowledged.size, generated.size, 'every generated event was eventually acknowledged');
  for (const id of generated) assert.ok(counts.has(id), `event ${id} is queued at least once`);
  for (const id of counts.keys()) assert.ok(generated.has(id), `queued event ${id} was sent`);

  // The merged view: run the consumer to completion, then every (data_set_id, id) exactly once.
  const worker = spawn(process.execPath, [BIN, '--data-dir', dataDir, 'worker'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let workerErr = '';
  worker.stderr!.setEncoding('utf8').on('data', (t: string) => (workerErr += t));
  try {
    await waitFor(
      'the consumer to catch up',
      async () => {
        const status = await cliJson<{ lag_records: number; queue_last_seq: number; next_seq: number }>(dataDir, ['worker', 'status']);
        return status.lag_records === 0 && status.next_seq > status.queue_last_seq;
      },
      120_000,
      250,
    );
  } finally {
    const exited = once(worker, 'exit');
    worker.kill('SIGTERM');
    const [code] = (await exited) as [number | null];
    assert.equal(code, 0, `ecapi-ingest worker exits 0: ${workerErr}`);
  }
  const exported = await cli(dataDir, ['events', 'export', '--data-set', DS]);
  assert.equal(exported.code, 0, exported.stderr);
  const merged = exported.stdout.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as { data_set_id: string; id: string; merged_count: number });
  const mergedIds = new Map<string, number>();
  for (const m of merged) mergedIds.set(`${m.data_set_id}\u0000${m.id}`, (mergedIds.get(`${m.data_set_id}\u0000${m.id}`) ?? 0) + 1);
  figures.mergedRecords = merged.length;
  figures.mergedDuplicates = merged.length - mergedIds.size;
  assert.equal(figures.mergedDuplicates, 0, 'each (data_set_id, id) is held once in the merged view');
  assert.equal(mergedIds.size, generated.size, 'the merged view holds every event sent');
  for (const id of generated) assert.equal(mergedIds.get(`${DS}\u0000${id}`), 1, `merged record of ${id}`);
  assert.equal(merged.reduce((n, m) => n + m.merged_count, 0), records.length, 'merged counts add up to the queued copies');
  log(JSON.stringify(figures));
  return figures;
}
