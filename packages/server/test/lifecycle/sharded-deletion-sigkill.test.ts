/**
 * The sharded layout's deletions survive a SIGKILL (lifecycle/sharded-view-eraser.ts,
 * lifecycle/parts-fence.ts): a `worker` (ECAPI_VIEW_LAYOUT=sharded, 2 record shards and 2 identity
 * parts) killed at random moments (up to six times) while it carries out `identities forget` (with and without
 * --suppress) and `events delete` in two data sets (one in each identity part), then restarted,
 * finishes every request with the counts an uninterrupted worker gives from the same data dir, and
 * leaves the same view (every file, table by table), the same queue, no part held and no byte of
 * the people forgotten in any file. The seed of the kill moments is printed to replay one.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, existsSync } from 'node:fs';
import Database from 'better-sqlite3';
import { SqliteEventQueue } from '../../src/queue/sqlite-event-queue.js';
import { queueDbFile, viewDbFile } from '../../src/config.js';
import { viewShardFile } from '../../src/merged-view/sqlite-view-layout.js';
import { partitionAmong } from '../../src/model/data-set-partition.js';
import { cli, cliJson, exportQueue, tempDataDir, TEST_PROFILE } from '../helpers/server-process.js';
import { sha } from '../helpers/event-generator.js';
import { digestNeedles, residue, textNeedle } from '../helpers/erasure-scan.js';
import { assertSameTables, dumpView, dumpViewFiles, viewFences, viewFilesOf, viewLayoutOf } from '../helpers/view-dump.js';
import { assertRunning, logLines, runWorkerUntil, startWorker, type WorkerProcess } from '../helpers/worker-process.js';

const PARTITIONS = 2;
// Queue retention off: it would prune the queue at moments that differ between the two runs.
const WORKER = { partitions: PARTITIONS, layout: 'sharded', args: ['--retention', '0'] } as const;

/** A small deterministic generator, so that a failing run can be replayed with its seed. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

interface Person {
  readonly email: string;
  /** The ids of the person's merged records, and how many events of theirs were queued. */
  readonly ids: Set<string>;
  queued: number;
}

/**
 * 'shop': 8,000 events, every other one of person A (a fifth of them with A's phone too; some are
 * re-sends of A's earlier events), the others of one-off people; 'store': 3,000 events, every
 * third one of person B. Appended as 400-event bodies (larger than 32 KiB: the body log), received
 * in the last hour.
 */
async function fillQueue(dataDir: string, rnd: string) {
  const A: Person = { email: sha(`sharded-del-a-${rnd}@example.com`), ids: new Set(), queued: 0 };
  const B: Person = { email: sha(`sharded-del-b-${rnd}@example.com`), ids: new Set(), queued: 0 };
  const phoneA = sha(`+3360000${rnd}`);
  const shop = Array.from({ length: 8000 }, (_, i) => {
    if (i % 2 === 1) return { id: `o-${i}-${rnd}`, user_data: { email_address: [sha(`o-${i}-${rnd}`)] } };
    const id = i % 40 === 0 && i >= 80 ? `p-${i - 80}-${rnd}` : `p-${i}-${rnd}`; // a re-send of an earlier event of A
    A.ids.add(id);
    A.queued++;
    return { id, user_data: { email_address: [A.email], ...(i % 10 === 2 ? { phone_numbers: [phoneA] } : {}) } };
  });
  const store = Array.from({ length: 3000 }, (_, i) => {
    if (i % 3 !== 0) return { id: `s-${i}-${rnd}`, user_data: { email_address: [sha(`s-${i}-${rnd}`)] } };
    B.ids.add(`q-${i}-${rnd}`);
    B.queued++;
    return { id: `q-${i}-${rnd}`, user_data: { email_address: [B.email] } };
  });
  const queue = new SqliteEventQueue(queueDbFile(dataDir, 'production'));
  const receivedAt = Date.now() - 3_600_000;
  let n = 0;
  for (const [dataSetId, events] of [['shop', shop], ['store', store]] as const) {
    for (let i = 0; i < events.length; i += 400) {
      const body = events.slice(i, i + 400).map((e, j) => ({
        ...e,
        data_set_id: dataSetId,
        timestamp: Math.floor(receivedAt / 1000) + i + j,
        event_type: 'purchase',
        value: 10,
        currency_code: 'EUR',
      }));
      await queue.append({ requestId: `req-${dataSetId}-${i}`, keyId: 'key_test', dataSetId, receivedAt: receivedAt + n, policyVersion: 1, mergeWindowMs: 7 * 86_400_000, events: body, metas: body.map(() => undefined) });
      n += body.length;
    }
  }
  await queue.close();
  return { A, B, phoneA, total: n };
}

type Deletion = { request_id: number; data_set_id: string; kind: string; state: string; bound_seq: number; suppress: boolean; result: Record<string, number> | null };

async function deletions(dataDir: string): Promise<Deletion[]> {
  const rows = await cliJson<Deletion[]>(dataDir, ['deletions']);
  return rows.map(({ request_id, data_set_id, kind, state, bound_seq, suppress, result }) => ({ request_id, data_set_id, kind, state, bound_seq, suppress, result })).sort((a, b) => a.request_id - b.request_id);
}

/**
 * Rows deleted so far by each request, over every file of the view (the erasers' tallies,
 * `lifecycle_erasures`, written in the transactions that delete): a request in the middle of its
 * deletions has a sum that grows.
 */
function erasedSoFar(viewFile: string): Map<number, number> {
  const sums = new Map<number, number>();
  const { identityParts, shards } = viewFilesOf(viewFile);
  for (const file of [...identityParts, ...shards]) {
    const db = new Database(file, { readonly: true });
    try {
      if (db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'lifecycle_erasures'").get() === undefined) continue;
      for (const row of db.prepare('SELECT request_id, records + identities + links AS n FROM lifecycle_erasures').all() as { request_id: number; n: number }[]) {
        sums.set(row.request_id, (sums.get(row.request_id) ?? 0) + row.n);
      }
    } finally {
      db.close();
    }
  }
  return sums;
}

const allDone = (dataDir: string) => async () => (await deletions(dataDir)).every((d) => d.state === 'done');

test('sharded layout: a worker SIGKILLed at random moments of identities forget and events delete, restarted, ends with the counts and the view of an uninterrupted worker', {
  timeout: 300_000,
  // The embedded view's layout; its queue is filled through queue.db and its workers run without a database URL.
  skip: TEST_PROFILE === 'postgres' ? 'embedded profile only (the sharded layout is SQLite files)' : false,
}, async (t) => {
  const seed = Number(process.env.ECAPI_TEST_SEED ?? Math.floor(Math.random() * 2 ** 31));
  const rand = random(seed);
  const rnd = seed.toString(16).padStart(8, '0');
  const reference = tempDataDir('ecapi-sharded-del-ref-');
  for (const ds of ['shop', 'store']) await cliJson(reference, ['data-set', 'create', ds]);
  assert.notEqual(partitionAmong('shop', PARTITIONS), partitionAmong('store', PARTITIONS), 'premise: the two data sets are in different identity parts');
  const { A, B, phoneA, total } = await fillQueue(reference, rnd);
  await runWorkerUntil(reference, { ...WORKER, what: 'the first run (consuming the queue)' });
  const viewFile = viewDbFile(reference, 'production');
  assert.deepEqual(viewLayoutOf(viewFile), { partitions: PARTITIONS, kind: 'sharded' }, 'the sharded layout is recorded in view.db');
  const status = await cliJson<{ view_layout?: string; view_partitions?: number }>(reference, ['worker', 'status']);
  assert.deepEqual([status.view_layout, status.view_partitions], ['sharded', PARTITIONS], 'worker status --json names the layout');
  for (let k = 0; k < PARTITIONS; k++) assert.ok(existsSync(viewShardFile(viewFile, k)), `record shard ${k}'s file`);
  const before = dumpView(viewFile);
  assert.equal((before.view_records as unknown[]).length, total - (A.queued - A.ids.size), 'every event consumed (A\'s re-sends merged)');

  // The requests, pending: no worker runs. The same data dir copied: both runs start from one state.
  const requests = [
    ['identities', 'forget', 'shop', '--identifier', `email:${A.email}`],
    ['events', 'delete', 'store', `s-1-${rnd}`],
    ['identities', 'forget', 'store', '--identifier', `email:${B.email}`, '--suppress'],
    ['events', 'delete', 'shop', `o-3-${rnd}`],
  ];
  for (const args of requests) {
    const submitted = await cli(reference, ['--json', ...args, '--no-wait']);
    assert.equal(submitted.code, 3, `${args.join(' ')}: pending (${submitted.stderr})`);
  }
  const killed = tempDataDir('ecapi-sharded-del-killed-');
  cpSync(reference, killed, { recursive: true });

  // The uninterrupted worker.
  const uninterrupted = await runWorkerUntil(reference, { ...WORKER, what: 'the uninterrupted deletions', done: allDone(reference) });
  const at = (msg: string) => new Map(logLines(uninterrupted.worker, msg).map((l) => [l.request_id, Date.parse(l.time as string)]));
  const [startedAt, doneAt] = [at('deletion request started'), at('deletion request done')];
  t.diagnostic(`uninterrupted: ${[...startedAt].map(([id, ms]) => `request ${id as number} ${doneAt.get(id)! - ms} ms`).join(', ')}`);
  const expected = await deletions(reference);
  assert.deepEqual(
    expected.map((d) => [d.kind, d.data_set_id, d.state, d.result]),
    [
      ['forget_identifier', 'shop', 'done', { view_records: A.ids.size, identities: 1, identifier_links: 2, queue_events: A.queued, suppressed_identifiers: 0 }],
      ['delete_event', 'store', 'done', { view_records: 1, identities: 1, identifier_links: 1, queue_events: 1, suppressed_identifiers: 0 }],
      ['forget_identifier', 'store', 'done', { view_records: B.ids.size, identities: 1, identifier_links: 1, queue_events: B.queued, suppressed_identifiers: 1 }],
      ['delete_event', 'shop', 'done', { view_records: 1, identities: 1, identifier_links: 1, queue_events: 1, suppressed_identifiers: 0 }],
    ],
    'the uninterrupted worker deletes what the docs say',
  );

  // Killed up to six times, then left to finish. Odd runs: at a random moment after a request
  // started (or resumed): the first within the first request (about a second uninterrupted:
  // holding the parts, then its records page by page), the later ones anywhere in the requests (or
  // after all of them: not counted). Even runs: a few milliseconds after the worker deleted its
  // first rows (a request's tally grew), so that some kills land between the transactions of the
  // shards and of the identity part (sharded-view-eraser.ts "Order").
  const workers: WorkerProcess[] = [];
  const killedView = viewDbFile(killed, 'production');
  // From lifecycle.db, not the logs: a worker killed just after a request was done may not have logged it.
  const pendingIds = async () => new Set((await deletions(killed)).filter((d) => d.state !== 'done').map((d) => d.request_id));
  const midRequest: string[] = []; // the request each kill interrupted, between its start and its done
  for (let k = 0; k < 6 && (await pendingIds()).size > 0; k++) {
    const onProgress = k % 2 === 1;
    const tallies = erasedSoFar(killedView);
    const worker = startWorker(killed, { ...WORKER, logLevel: 'info' });
    workers.push(worker);
    const deadline = Date.now() + 30_000;
    let checkedAt = Date.now();
    const moved = () => [...erasedSoFar(killedView)].some(([id, n]) => n > (tallies.get(id) ?? 0));
    try {
      while (onProgress ? !moved() : logLines(worker, 'deletion request started').length === 0) {
        assertRunning(worker, `run ${k + 1} (before its kill, seed ${seed})`);
        assert.ok(Date.now() < deadline, `run ${k + 1}: no deletion ${onProgress ? 'deleted anything' : 'request started'} within 30 s (seed ${seed}):\n${worker.log()}`);
        await new Promise((r) => setTimeout(r, onProgress ? 1 : 5));
        if (Date.now() - checkedAt > 500) {
          if ((await pendingIds()).size === 0) break; // the worker killed last had finished them, or this one did
          checkedAt = Date.now();
        }
      }
      await new Promise((r) => setTimeout(r, Math.floor(rand() * (onProgress ? 20 : k === 0 ? 600 : 1500))));
      assertRunning(worker, `run ${k + 1} (at its kill, seed ${seed})`);
    } finally {
      worker.child.kill('SIGKILL');
      await worker.exited;
    }
    const started = logLines(worker, 'deletion request started').at(-1);
    if (started && (await pendingIds()).has(started.request_id as number)) midRequest.push(`request ${started.request_id as number}${started.resumed ? ' (resumed)' : ''}`);
  }
  const last = await runWorkerUntil(killed, { ...WORKER, what: `the last run (seed ${seed})`, done: allDone(killed) });
  workers.push(last.worker);
  assert.ok(midRequest.length >= 1, `killed at least once in the middle of a request (seed ${seed})`);
  const resumed = workers.flatMap((w) => logLines(w, 'deletion request started')).filter((l) => l.resumed === true).length;
  t.diagnostic(`seed ${seed}: SIGKILLs in ${midRequest.join(', ')}; ${resumed} attempts resumed a partly done request`);

  // The same requests, counts, view and queue as the uninterrupted worker's.
  assert.deepEqual(await deletions(killed), expected, `every request done with the uninterrupted counts (seed ${seed})`);
  assert.deepEqual(viewFences(killedView), [], `no part left held (seed ${seed})`);
  assert.deepEqual(viewFences(viewFile), [], 'no part left held (uninterrupted)');
  const actual = dumpView(killedView);
  const wanted = dumpView(viewFile);
  assertSameTables(actual, wanted, `the view (seed ${seed})`);
  const [killedFiles, wantedFiles] = [dumpViewFiles(killedView), dumpViewFiles(viewFile)];
  assert.deepEqual(Object.keys(killedFiles), Object.keys(wantedFiles));
  for (const file of Object.keys(wantedFiles)) assertSameTables(killedFiles[file]!, wantedFiles[file]!, `${file} (seed ${seed})`);
  assert.equal((actual.view_records as unknown[]).length, (before.view_records as unknown[]).length - A.ids.size - B.ids.size - 2, 'the records of the four requests went, no other');
  assertSameTables({ queue: await exportQueue(killed) }, { queue: await exportQueue(reference) }, `the queue (seed ${seed})`);

  for (const [ds, id] of [['shop', [...A.ids][0]!], ['shop', `o-3-${rnd}`], ['store', `q-0-${rnd}`], ['store', `s-1-${rnd}`]] as const) {
    assert.notEqual((await cli(killed, ['--json', 'events', 'get', ds, id])).code, 0, `${ds} ${id} is gone`);
  }
  assert.equal((await cli(killed, ['--json', 'events', 'get', 'shop', `o-5-${rnd}`])).code, 0, 'another record of shop is kept');
  const needles = [
    ...digestNeedles('email A', A.email),
    ...digestNeedles('phone A', phoneA),
    ...digestNeedles('email B', B.email),
    ...[...A.ids].filter((_, i) => i % 100 === 0).map((id) => textNeedle(id, id)),
    ...[...B.ids].filter((_, i) => i % 100 === 0).map((id) => textNeedle(id, id)),
  ];
  assert.deepEqual(residue(killed, needles), [], `no byte of A or B left in any file (seed ${seed})`);
});
