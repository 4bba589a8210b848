/**
 * Black-box: `serve` runs the consumer by default; re-sent events collapse, identities and stats
 * are readable from the CLI and the admin port; `serve --no-worker` leaves a visible lag that a
 * standalone `ecapi-ingest worker` consumes.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { BIN, cli, cliJson, consumerCaughtUp, profileEnv, provision, startServer, tempDataDir } from '../helpers/server-process.js';
import { postSigned, sampleEvent } from '../helpers/https-client.js';
import { sha } from '../helpers/event-generator.js';

async function waitFor<T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}


/** At least 32 characters: the service refuses weaker admin tokens (admin-guard.ts). */
const ADMIN_TOKEN = 'admin-secret-0123456789abcdefghijklmnop';

test('serve runs the consumer: merged records, identities, stats on the CLI and the admin port', { timeout: 60_000 }, async () => {
  const dataDir = tempDataDir();
  const creds = await provision(dataDir, ['shop']);
  const server = await startServer({ dataDir, args: ['--workers', '1'], extraEnv: { ECAPI_ADMIN_TOKEN: ADMIN_TOKEN } });
  try {
    const A = sha('a@example.com');
    const P = sha('+15550001');
    const first = await postSigned(server.port, server.ca, creds, 'shop', JSON.stringify({
      events: [
        sampleEvent('shop', { id: 'order-1', value: 10, user_data: { email_address: [A] } }),
        sampleEvent('shop', { id: undefined, event_type: 'page_view', value: undefined, currency_code: undefined }),
        sampleEvent('shop', { id: 'lead-1', event_type: 'generate_lead', value: undefined, currency_code: undefined, user_data: { phone_numbers: [P] } }),
        { data_set_id: 'shop', event_type: 'purchase' },
        sampleEvent('shop', { user_data: { email_address: ['not-a-hash'] } }),
      ],
    }));
    assert.equal(first.status, 207);
    // A re-send of order-1 with more identifiers, in another request.
    const second = await postSigned(server.port, server.ca, creds, 'shop', JSON.stringify(
      sampleEvent('shop', { id: 'order-1', value: 12, user_data: { email_address: [A], phone_numbers: [P] } }),
    ));
    assert.equal(second.status, 200);

    const status = await waitFor('the consumer to catch up', async () => {
      const s = await cliJson(dataDir, ['worker', 'status']);
      return s.next_seq === 5 && s.lag_records === 0 ? s : undefined;
    });
    assert.equal(status.running, true);
    assert.equal(typeof status.pid, 'number');

    const record = await cliJson(dataDir, ['events', 'get', 'shop', 'order-1']);
    assert.equal(record.merged_count, 2);
    assert.equal(record.event.value, 12);
    assert.deepEqual(record.event.user_data, { email_address: [A], phone_numbers: [P] });
    // order-1 (email A, then phone P) links lead-1's identity (phone P) into its own.
    const lead = await cliJson(dataDir, ['events', 'get', 'shop', 'lead-1']);
    assert.equal(lead.identity_key, record.identity_key);
    const identity = await cliJson(dataDir, ['identities', 'get', 'shop', record.identity_key]);
    assert.equal(identity.event_count, 2);
    assert.deepEqual(identity.identifiers, [`email:${A}`, `phone:${P}`]);
    // The same identity looked up by one of its identifiers, as `identities forget` takes one (upper-case hex normalized).
    assert.deepEqual(await cliJson(dataDir, ['identities', 'get', 'shop', '--identifier', `email:${A.toUpperCase()}`]), identity);
    // The phone links to the identity merged into it: the same live identity, through that key.
    const byPhone = await cliJson(dataDir, ['identities', 'get', 'shop', '--identifier', `phone:${P}`]);
    assert.deepEqual({ ...byPhone, requested_key: identity.requested_key }, identity);
    const unknown = await cli(dataDir, ['identities', 'get', 'shop', '--identifier', `email:${sha('nobody@example.com')}`]);
    assert.equal(unknown.code, 1);
    assert.equal(unknown.stderr, 'error: no identity with that email identifier in data set shop\n');
    assert.equal((await cli(dataDir, ['identities', 'get', 'shop', '--identifier', 'email:not-a-digest'])).code, 1);
    assert.equal((await cli(dataDir, ['identities', 'get', 'shop'])).stderr, 'error: give exactly one of <identity_key> and --identifier\n');

    const stats = await waitFor('ingest stats', async () => {
      const s = await cliJson(dataDir, ['stats', 'shop', '--since', '1h']);
      // accepted is counted by the queue commit (at once); rejections are flushed about once a second.
      return s.totals.ingest.accepted === 4 && s.totals.ingest.rejected === 2 ? s : undefined;
    });
    assert.equal(stats.totals.events, 3);
    assert.equal(stats.totals.merged_duplicates, 1);
    assert.equal(stats.totals.ingest.rejected, 2);
    assert.deepEqual(stats.totals.ingest.rejections, {
      'hashed field user_data.email_address[] is not a 64-char lowercase hex sha256': 1,
      'missing required field: timestamp': 1,
    });
    assert.deepEqual(stats.totals.value_by_currency, { USD: 12 });

    const admin = `http://127.0.0.1:${server.adminPort}`;
    assert.equal((await fetch(`${admin}/api/stats/shop`)).status, 401);
    const viaAdmin = await fetch(`${admin}/api/stats/shop?since=1h`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    assert.equal(viaAdmin.status, 200);
    assert.deepEqual(((await viaAdmin.json()) as { totals: unknown }).totals, stats.totals);
    const metrics = await (await fetch(`${admin}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).text();
    assert.match(metrics, /^ecapi_consumer_lag_records 0$/m);
    assert.match(metrics, /^ecapi_consumer_lag_seconds 0$/m);

    const exported = (await cli(dataDir, ['events', 'export', '--data-set', 'shop'])).stdout.trim().split('\n').map((l) => JSON.parse(l) as { id: string | null });
    assert.deepEqual(exported.map((r) => r.id), ['order-1', null, 'lead-1']);
  } finally {
    assert.equal(await server.stop(), 0);
  }
  const after = await cliJson(dataDir, ['worker', 'status']);
  assert.equal(after.running, false);
  // No identifier or event content in the logs.
  assert.doesNotMatch(server.output(), /a@example|order-1|[0-9a-f]{64}/);
});

test('serve --no-worker: the lag is visible; `ecapi-ingest worker` on its own consumes it', { timeout: 60_000 }, async () => {
  const dataDir = tempDataDir();
  const creds = await provision(dataDir, ['shop']);
  const server = await startServer({ dataDir, args: ['--workers', '1', '--no-worker'] });
  try {
    const res = await postSigned(server.port, server.ca, creds, 'shop', JSON.stringify({ events: [sampleEvent('shop'), sampleEvent('shop')] }));
    assert.equal(res.status, 200);
    await new Promise((r) => setTimeout(r, 300));
    const lagging = await cliJson(dataDir, ['worker', 'status']);
    assert.equal(lagging.running, false);
    assert.equal(lagging.lag_records, 2);
    assert.ok(lagging.lag_seconds > 0);
    const metrics = await (await fetch(`http://127.0.0.1:${server.adminPort}/metrics`)).text();
    assert.match(metrics, /^ecapi_consumer_lag_records 2$/m);

    const worker = spawn(process.execPath, [BIN, '--data-dir', dataDir, 'worker'], { stdio: 'ignore', env: { ...process.env, ...(await profileEnv(dataDir)) } });
    await waitFor('the standalone worker', async () => (await cliJson(dataDir, ['worker', 'status'])).lag_records === 0);
    worker.kill('SIGTERM');
    const [code] = await once(worker, 'exit');
    assert.equal(code, 0);
  } finally {
    await server.stop();
  }
});

test('a re-send is decided by the merge window it was accepted under, not the one in force when the consumer applies it', { timeout: 90_000 }, async () => {
  const dataDir = tempDataDir();
  const creds = await provision(dataDir, ['shop']);
  await cliJson(dataDir, ['data-set', 'policy', 'shop', '--merge-window', '1h']);
  const send = async (value: number) => {
    const server = await startServer({ dataDir, args: ['--workers', '1', '--no-worker'] });
    try {
      const res = await postSigned(server.port, server.ca, creds, 'shop', JSON.stringify(sampleEvent('shop', { id: 'order-1', value })));
      assert.equal(res.status, 200);
    } finally {
      assert.equal(await server.stop(), 0);
    }
  };
  // Queued with nothing applying them: the first copy, then a re-send more than 500 ms later, both
  // under the 1 h window.
  await send(10);
  await new Promise((r) => setTimeout(r, 1_200));
  await send(11);
  // The window shrinks before the consumer has seen either; a third copy is accepted under it.
  await cliJson(dataDir, ['data-set', 'policy', 'shop', '--merge-window', '500ms']);
  await send(12);

  const server = await startServer({ dataDir, args: ['--workers', '1'] });
  try {
    await consumerCaughtUp(dataDir, 30_000);
    // The second copy merges (its window was 1 h); the third is discarded (500 ms).
    const record = await cliJson(dataDir, ['events', 'get', 'shop', 'order-1']);
    assert.equal(record.merged_count, 2);
    assert.equal(record.event.value, 11);
    const stats = await cliJson(dataDir, ['stats', 'shop', '--since', '1h']);
    assert.equal(stats.totals.merged_duplicates, 1);
    assert.equal(stats.totals.discarded_after_merge_window, 1);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

test('worker --retention deletes queue records it has applied; the merged view keeps them and later events still flow', { timeout: 90_000 }, async () => {
  const dataDir = tempDataDir();
  const creds = await provision(dataDir, ['kept']);
  const server = await startServer({ dataDir, args: ['--workers', '1', '--no-worker'] });
  const sent: string[] = [];
  const send = async (events: Record<string, unknown>[]) => {
    const res = await postSigned(server.port, server.ca, creds, 'kept', JSON.stringify({ events }));
    assert.equal(res.status, 200, res.text);
    sent.push(...events.map((e) => e.id as string));
  };
  const queued = async () => (await cli(dataDir, ['queue', 'export'])).stdout.split('\n').filter((l) => l.trim() !== '').length;
  const merged = async () => {
    const out = await cli(dataDir, ['events', 'export', '--data-set', 'kept']);
    return new Set(out.stdout.split('\n').filter((l) => l.trim() !== '').map((l) => (JSON.parse(l) as { id: string }).id));
  };
  try {
    // One batch large enough for the body log (embedded profile), and a few small requests.
    await send(Array.from({ length: 60 }, (_, i) => sampleEvent('kept', { id: `big-${i}`, properties: { note: 'n'.repeat(900) } })));
    for (let i = 0; i < 4; i++) await send([sampleEvent('kept', { id: `small-${i}` })]);
    assert.equal(await queued(), 64);

    const env = { ...process.env, ...(await profileEnv(dataDir)) };
    const worker = spawn(process.execPath, [BIN, '--data-dir', dataDir, 'worker', '--retention', '1ms', '--retention-every', '200ms'], { stdio: 'ignore', env });
    try {
      await waitFor('applied, then pruned', async () => (await cliJson(dataDir, ['worker', 'status'])).lag_records === 0 && (await queued()) < 64);
      const view = await merged();
      for (const id of sent) assert.ok(view.has(id), `${id} is in the merged view`);
      // Sequence numbers go on after the prune: new events are still applied.
      await send([sampleEvent('kept', { id: 'after-prune' })]);
      await waitFor('the event after the prune applied', async () => (await merged()).has('after-prune'));
    } finally {
      const exited = once(worker, 'exit');
      worker.kill('SIGTERM');
      const [code] = (await exited) as [number | null];
      assert.equal(code, 0);
    }
  } finally {
    await server.stop();
  }
});
