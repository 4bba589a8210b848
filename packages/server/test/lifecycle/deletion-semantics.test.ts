/**
 * What a deletion covers under ingestion (issue 29, docs "Data lifecycle"), black-box with a real
 * `serve --no-worker` and `worker` processes: a request covers the events queued up to its bound
 * (the queue's last sequence number when it was made), in the view and in the queue alike.
 * - Before the request: gone from both.
 * - After it (sent after the command returned, applied before the worker carried it out, and sent
 *   while it runs): kept in both; the identity stays for them.
 * - A re-send queued after the bound of an event sent before it, merged into the deleted record:
 *   gone from both (its queued copy is erased with the record).
 * The counts in the audit log are exactly the covered ones. On both profiles.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import { BIN, cli, cliJson, consumerCaughtUp, exportQueue, profileEnv, provision, startServer, tempDataDir } from '../helpers/server-process.js';
import { postSigned } from '../helpers/https-client.js';
import { sha } from '../helpers/event-generator.js';
import { waitFor } from '../helpers/fault-tools.js';
import { purchaseEvent } from '../helpers/purchase-event.js';

const event = (id: string, userData: Record<string, unknown>) => purchaseEvent('shop', id, userData);

async function startWorker(dataDir: string): Promise<ChildProcess & { output: () => string }> {
  const child = spawn(process.execPath, [BIN, '--data-dir', dataDir, '--env', 'production', 'worker'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ECAPI_LOG_LEVEL: 'info', ...(await profileEnv(dataDir)) },
  });
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (t: string) => (output += t));
  child.stderr!.setEncoding('utf8').on('data', (t: string) => (output += t));
  return Object.assign(child, { output: () => output });
}

async function stopWorker(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  await once(child, 'exit');
}

const caughtUp = (dataDir: string) => consumerCaughtUp(dataDir, 30_000);

test('a deletion covers the events queued up to its request, in view and queue alike: before gone, after and during kept, a later re-send of a covered event gone', { timeout: 60_000 }, async () => {
  const dataDir = tempDataDir('ecapi-semantics-');
  const creds = await provision(dataDir, ['shop']);
  const server = await startServer({ dataDir, args: ['--workers', '1', '--no-worker'] });
  const workers: ChildProcess[] = [];
  const rnd = randomBytes(6).toString('hex');
  const A = sha(`semantics-${rnd}@example.com`);
  const id = (kind: string, i: number | string) => `${kind}-${i}-${rnd}`;
  try {
    const post = async (events: unknown[]) => {
      const res = await postSigned(server.port, server.ca, creds, 'shop', JSON.stringify({ events }));
      assert.equal(res.status, 200, res.text);
    };
    const before = Array.from({ length: 20 }, (_, i) => id('before', i));
    await post(before.map((e) => event(e, { email_address: [A] })));
    await post([event(id('other', 0), { email_address: [sha(`other-${rnd}`)] })]);
    const w1 = await startWorker(dataDir);
    workers.push(w1);
    await caughtUp(dataDir);
    await stopWorker(w1);
    // Queued but not applied when the request is made: the next worker applies it in the same
    // batch as what follows the request, so the request is carried out after those are merged.
    await post([event(id('other', 1), { email_address: [sha(`other-${rnd}`)] })]);

    // The request is recorded (bound = the queue's last sequence number now); no worker runs yet.
    const requested = await cli(dataDir, ['--json', 'identities', 'forget', 'shop', '--identifier', `email:${A}`, '--no-wait']);
    assert.equal(requested.code, 3, requested.stderr);
    const { request_id: requestId, bound_seq: bound } = JSON.parse(requested.stdout) as { request_id: number; bound_seq: number };
    assert.ok(bound > 0);

    // After the request: new events of the person, and a re-send of one covered event (same id,
    // same person: it merges into the record that is to be deleted).
    const after = Array.from({ length: 20 }, (_, i) => id('after', i));
    await post(after.map((e) => event(e, { email_address: [A] })));
    await post([event(before[0]!, { email_address: [A] })]);

    // The worker applies them, then carries the request out while more of the person's events come in.
    let sending = true;
    const during: string[] = [];
    const w2 = await startWorker(dataDir);
    workers.push(w2);
    const sender = (async () => {
      for (let n = 0; sending; n++) {
        const batch = Array.from({ length: 10 }, (_, i) => id('during', `${n}x${i}`));
        await post(batch.map((e) => event(e, { email_address: [A] })));
        during.push(...batch);
      }
    })();
    const done = await waitFor(
      'the request to be done',
      async () => {
        const entry = (await cliJson(dataDir, ['deletions', 'shop'])).find((r: { request_id: number }) => r.request_id === requestId);
        return entry?.state === 'done' ? entry : undefined;
      },
      30_000,
      200,
    );
    sending = false;
    await sender;
    await caughtUp(dataDir);

    const viewIds = new Set(
      (await cli(dataDir, ['events', 'export', '--data-set', 'shop'])).stdout
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => (JSON.parse(l) as { id: string }).id),
    );
    const inView = async (e: string) => viewIds.has(e);
    assert.equal(await inView(id('other', 1)), true, 'the export works');
    const queue = await exportQueue(dataDir);
    const queued = new Map<string, number[]>();
    for (const r of queue) queued.set(r.event.id as string, [...(queued.get(r.event.id as string) ?? []), r.seq]);

    for (const e of before) {
      assert.equal(await inView(e), false, `${e} (before) left the view`);
      assert.equal(queued.has(e), false, `${e} (before) left the queue${e === before[0] ? ', its re-send after the bound too' : ''}`);
    }
    for (const e of [...after, ...during]) {
      assert.equal(await inView(e), true, `${e} (after the request) stays in the view`);
      assert.equal(queued.get(e)?.length, 1, `${e} (after the request) stays in the queue`);
      assert.ok(queued.get(e)![0]! > bound);
    }
    assert.ok(during.length > 0);
    // Exactly what was covered: 20 records; 20 queued events and the re-send merged into one of them.
    assert.equal(done.result.view_records, before.length);
    assert.equal(done.result.queue_events, before.length + 1);
    assert.equal(done.result.identities, 0, 'the identity keeps the later records');
    const kept = await cliJson(dataDir, ['--json', 'events', 'get', 'shop', after[0]!]);
    assert.equal((await cliJson(dataDir, ['identities', 'get', 'shop', kept.identity_key])).event_count, after.length + during.length);
  } finally {
    for (const w of workers) await stopWorker(w);
    assert.equal(await server.stop(), 0);
  }
});
