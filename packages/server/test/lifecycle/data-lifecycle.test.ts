/**
 * Black-box, against a real server (its worker): retention of the merged view, `identities forget`
 * (view, identity, queue copies including body-log bytes), `events delete`, `--suppress`, the
 * audit log, bad input, and deletion while ingesting. On both profiles (ECAPI_TEST_PROFILE=postgres:
 * the same assertions; the body log and lifecycle.db exist only in the embedded profile).
 */
const embedded = TEST_PROFILE === 'sqlite';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, cliJson, consumerCaughtUp, exportQueue, provision, startServer, tempDataDir, TEST_PROFILE } from '../helpers/server-process.js';
import { postSigned } from '../helpers/https-client.js';
import { sha } from '../helpers/event-generator.js';
import { waitFor as waitForEvery } from '../helpers/fault-tools.js';
import { purchaseEvent } from '../helpers/purchase-event.js';

const waitFor = <T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 30_000) => waitForEvery(what, fn, timeoutMs);

/** An event stamped now (whole seconds), so that a short --max-age accepts it. */
const event = (id: string, userData: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) => purchaseEvent('shop', id, userData, extra);

const caughtUp = (dataDir: string) => consumerCaughtUp(dataDir);

const recordOf = async (dataDir: string, id: string) => {
  const r = await cli(dataDir, ['--json', 'events', 'get', 'shop', id]);
  return r.code === 0 ? JSON.parse(r.stdout) : null;
};

const exportedIds = async (dataDir: string) =>
  (await cli(dataDir, ['events', 'export', '--data-set', 'shop'])).stdout
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => (JSON.parse(l) as { id: string }).id)
    .sort();

test('view retention: records not updated within it leave events get/export and identities; statistics stay; a retention shorter than the merge window or max age is refused', { timeout: 90_000 }, async () => {
  const dataDir = tempDataDir();
  const creds = await provision(dataDir, ['shop']);
  // Refused and changes nothing: shorter than the merge window (7d default) or than the max age.
  const before = await cliJson(dataDir, ['data-set', 'list']);
  const tooShort = await cli(dataDir, ['data-set', 'policy', 'shop', '--view-retention', '1d']);
  assert.equal(tooShort.code, 1);
  assert.match(tooShort.stderr, /view retention 1d: it must be at least the merge window \(7d\) and the maximum event age \(90d\)/);
  const raisesMaxAge = await cli(dataDir, ['data-set', 'policy', 'shop', '--max-age', '365d']);
  assert.equal(raisesMaxAge.code, 1, 'a max age above the (default 180d) retention is refused too');
  assert.deepEqual(await cliJson(dataDir, ['data-set', 'list']), before);
  assert.equal(before[0].policy.view_retention, '180d', 'the default');

  const policy = await cliJson(dataDir, ['data-set', 'policy', 'shop', '--merge-window', '1s', '--max-age', '3s', '--view-retention', '4s']);
  assert.equal(policy.policy.view_retention, '4s');

  // ECAPI_LOW_SPACE_PERCENT=100: any disk is "low", so the warning path runs.
  const server = await startServer({ dataDir, args: ['--workers', '1'], extraEnv: { ECAPI_VIEW_RETENTION_EVERY: '500ms', ECAPI_LOW_SPACE_PERCENT: '100' } });
  try {
    const A = sha('old@example.com');
    const B = sha('new@example.com');
    assert.equal((await postSigned(server.port, server.ca, creds, 'shop', JSON.stringify({ events: [event('old-1', { email_address: [A] }), event('old-2')] }))).status, 200);
    await caughtUp(dataDir);
    const old = await recordOf(dataDir, 'old-1');
    assert.ok(old, 'applied');
    assert.ok(await cliJson(dataDir, ['identities', 'get', 'shop', old.identity_key]));
    // 2.5 s later new records (new-2 of the same person as old-1); old-1/old-2 expire 4 s after their last update
    // (plus the 5 s commit margin and their timestamp's second: docs "Retention and the merge rules"), 2.5 s before these.
    await new Promise((r) => setTimeout(r, 2500));
    const news = { events: [event('new-1', { email_address: [B] }), event('new-2', { email_address: [A] })] };
    assert.equal((await postSigned(server.port, server.ca, creds, 'shop', JSON.stringify(news))).status, 200);
    await caughtUp(dataDir);
    assert.equal((await cliJson(dataDir, ['identities', 'get', 'shop', old.identity_key])).event_count, 2);
    await waitFor('old records to expire', async () => (await recordOf(dataDir, 'old-1')) === null && (await recordOf(dataDir, 'old-2')) === null, 40_000);
    assert.ok(await recordOf(dataDir, 'new-1'), 'a record inside the retention stays');
    assert.deepEqual(await exportedIds(dataDir), ['new-1', 'new-2']);
    // The identity keeps its newer record: one event left, its identifier still linked.
    const kept = await cliJson(dataDir, ['identities', 'get', 'shop', old.identity_key]);
    assert.equal(kept.event_count, 1);
    assert.deepEqual(kept.identifiers, [`email:${A}`]);
    await waitFor('new records to expire too', async () => (await recordOf(dataDir, 'new-2')) === null, 20_000);
    assert.equal((await cli(dataDir, ['identities', 'get', 'shop', old.identity_key])).code, 1, 'the identity left with no record is gone');
    // Statistics are aggregates without identifiers: they keep counting the expired records.
    const stats = await cliJson(dataDir, ['stats', 'shop', '--since', '1h']);
    assert.equal(stats.totals.events, 4);
    assert.equal(stats.totals.ingest.accepted, 4);
    assert.deepEqual(await exportedIds(dataDir), []);

    // The disk is visible: bytes per store and free bytes on /metrics, the console's overview and data set page.
    const admin = `http://127.0.0.1:${server.adminPort}`;
    const metrics = await (await fetch(`${admin}/metrics`)).text();
    const gauge = (re: RegExp) => Number(re.exec(metrics)?.[1] ?? Number.NaN);
    assert.ok(gauge(/^ecapi_storage_bytes\{store="queue"\} (\d+)$/m) > 0);
    assert.ok(gauge(/^ecapi_storage_bytes\{store="view"\} (\d+)$/m) > 0);
    assert.ok(gauge(/^ecapi_storage_bytes\{store="control"\} (\d+)$/m) > 0);
    assert.ok(gauge(/^ecapi_data_dir_free_bytes (\d+)$/m) > 0);
    const overview = (await (await fetch(`${admin}/api/overview`)).json()) as { storage: { low: boolean; free_bytes: number; stores: Record<string, number> } };
    assert.equal(overview.storage.low, true);
    assert.ok(overview.storage.free_bytes > 0 && overview.storage.stores.lifecycle! > 0);
    const detail = (await (await fetch(`${admin}/api/data-sets/shop`)).json()) as { storage: { records: number }; policy: { view_retention_ms: number } };
    assert.equal(detail.policy.view_retention_ms, 4000);
    assert.equal(detail.storage.records, 0, 'every record expired');
  } finally {
    assert.equal(await server.stop(), 0);
  }
  assert.match(server.output(), /"msg":"view retention"/);
  assert.match(server.output(), /low free space on the data dir/);
});

test('identities forget, events delete, --suppress and the audit log; bad input changes nothing; no other event is lost while ingesting', { timeout: 120_000 }, async () => {
  const dataDir = tempDataDir();
  const creds = await provision(dataDir, ['shop']);
  const server = await startServer({ dataDir, args: ['--workers', '1'] });
  try {
    const A = sha('forget-me@example.com');
    const P = sha('+15550009999');
    const B = sha('keep-me@example.com');
    const C = sha('never-again@example.com');
    const post = async (body: unknown) => {
      const res = await postSigned(server.port, server.ca, creds, 'shop', JSON.stringify(body));
      assert.equal(res.status, 200, res.text);
    };
    await post({ events: [event('a-1', { email_address: [A] }), event('b-1', { email_address: [B] })] });
    // a-2 links phone P to A's identity; p-1 carries only P: it is the same person.
    await post({ events: [event('a-2', { email_address: [A], phone_numbers: [P] }), event('p-1', { phone_numbers: [P] })] });
    // A body of more than 32 KiB goes to the body log: the person's events in it must go there too.
    const big = Array.from({ length: 200 }, (_, i) => event(`big-${i}`, { email_address: [i % 3 === 0 ? A : B] }));
    await post({ events: big });
    await post(event('solo-1', { email_address: [B] }));
    await caughtUp(dataDir);
    const logDir = join(dataDir, 'production', 'queue.db-bodies');
    const logBytes = () => Buffer.concat(readdirSync(logDir).map((f) => readFileSync(join(logDir, f))));
    if (embedded) assert.ok(logBytes().includes(A), 'the large body is in the body log');

    const queueBefore = await exportQueue(dataDir);
    const viewBefore = await exportedIds(dataDir);
    const personIds = new Set(['a-1', 'a-2', 'p-1', ...big.filter((_, i) => i % 3 === 0).map((e) => e.id)]);
    const identityKey = (await recordOf(dataDir, 'a-1')).identity_key;

    // Bad input: a clear error, nothing recorded.
    const bad = [
      [['identities', 'forget', 'nope', '--identifier', `email:${A}`], /unknown data set "nope"/],
      [['identities', 'forget', 'shop', '--identifier', 'email:not-a-hash'], /64-character SHA-256 hex digests/],
      [['identities', 'forget', 'shop', '--identifier', 'fax:123'], /use <type>:<value>/],
      [['identities', 'forget', 'shop'], /exactly one of --identifier and --identity-key/],
      [['identities', 'forget', 'shop', '--identity-key', 'bob'], /identity keys look like ik_123/],
      // A key no identity can have (model/identity-key.ts: no leading zero), refused the same way.
      [['identities', 'forget', 'shop', '--identity-key', 'ik_007'], /identity keys look like ik_123/],
      [['events', 'delete', 'nope', 'a-1'], /unknown data set/],
    ] as const;
    for (const [args, message] of bad) {
      const r = await cli(dataDir, [...args]);
      assert.equal(r.code, 1, args.join(' '));
      assert.match(r.stderr, message);
    }
    assert.deepEqual(await cliJson(dataDir, ['deletions']), []);

    // Forget while another sender keeps ingesting B's events at full speed.
    let sending = true;
    const sentDuring: string[] = [];
    // Four senders back to back, as fast as the server answers.
    const sender = Promise.all(
      [0, 1, 2, 3].map(async (s) => {
        for (let n = 0; sending; n++) {
          const batch = Array.from({ length: 20 }, (_, i) => event(`during-${s}-${n}-${i}`, { email_address: [B] }));
          await post({ events: batch });
          sentDuring.push(...batch.map((e) => e.id));
        }
      }),
    );
    const forgot = await cliJson(dataDir, ['identities', 'forget', 'shop', '--identifier', `email:${A.toUpperCase()}`, '--actor', 'dpo@example.com']);
    sending = false;
    await sender;
    assert.equal(forgot.state, 'done');
    assert.equal(forgot.actor, 'dpo@example.com');
    assert.equal(forgot.result.view_records, personIds.size);
    assert.equal(forgot.result.queue_events, personIds.size);
    assert.equal(forgot.result.identities, 1);
    assert.equal(forgot.result.identifier_links, 2, 'email A and phone P');
    assert.ok(sentDuring.length > 0, 'events were sent during the deletion');

    await caughtUp(dataDir);
    for (const id of personIds) assert.equal(await recordOf(dataDir, id), null, `${id} left the view`);
    assert.equal((await cli(dataDir, ['identities', 'get', 'shop', identityKey])).code, 1, 'the identity is gone');
    // No other event was lost: the view and the queue hold exactly what they held, minus the person, plus what came meanwhile.
    const expectedView = [...viewBefore.filter((id) => !personIds.has(id)), ...sentDuring].sort();
    assert.deepEqual(await exportedIds(dataDir), expectedView);
    const queueAfter = await exportQueue(dataDir);
    const queueIds = queueAfter.map((r) => r.event.id as string);
    assert.deepEqual(queueIds.filter((id) => !id.startsWith('during-')), queueBefore.map((r) => r.event.id as string).filter((id) => !personIds.has(id)));
    assert.deepEqual(queueIds.filter((id) => id.startsWith('during-')).sort(), [...sentDuring].sort());
    assert.ok(!JSON.stringify(queueAfter).includes(A) && !JSON.stringify(queueAfter).includes(P), 'queue export holds none of their identifiers');
    // Sequence numbers of the others did not move.
    const seqOf = new Map(queueBefore.map((r) => [r.event.id as string, r.seq]));
    for (const r of queueAfter) if (seqOf.has(r.event.id as string)) assert.equal(r.seq, seqOf.get(r.event.id as string));
    // The body-log bytes are overwritten within a few worker rounds.
    if (embedded) await waitFor('the body-log bytes to be overwritten', async () => !logBytes().includes(A), 10_000);

    // events delete: one event, view and queue. --no-wait: recorded, exit code 3 while pending.
    const queued = await cli(dataDir, ['--json', 'events', 'delete', 'shop', 'solo-1', '--no-wait']);
    assert.equal(queued.code, 3);
    assert.equal(JSON.parse(queued.stdout).state, 'pending');
    const deleted = await waitFor('the worker to carry the deletion out', async () => {
      const entry = (await cliJson(dataDir, ['deletions', 'shop']))[0];
      return entry.state === 'done' ? entry : undefined;
    });
    assert.equal(deleted.kind, 'delete_event');
    assert.equal(deleted.result.view_records, 1);
    assert.equal(deleted.result.queue_events, 1);
    assert.equal(await recordOf(dataDir, 'solo-1'), null);
    assert.ok(!(await exportQueue(dataDir)).some((r) => r.event.id === 'solo-1'));
    assert.ok(await recordOf(dataDir, 'b-1'), 'the identity of solo-1 still has b-1');

    // --suppress: an identifier never seen yet; later events carrying it are accepted, dropped before the view, counted.
    const suppressed = await cliJson(dataDir, ['identities', 'forget', 'shop', '--identifier', `email:${C}`, '--suppress']);
    assert.equal(suppressed.state, 'done');
    assert.equal(suppressed.result.suppressed_identifiers, 1);
    await post({ events: [event('c-1', { email_address: [C] }), event('c-2', { email_address: [B, C] }), event('b-2', { email_address: [B] })] });
    await caughtUp(dataDir);
    assert.equal(await recordOf(dataDir, 'c-1'), null);
    assert.equal(await recordOf(dataDir, 'c-2'), null);
    assert.ok(await recordOf(dataDir, 'b-2'));
    const stats = await cliJson(dataDir, ['stats', 'shop', '--since', '1h']);
    assert.equal(stats.totals.suppressed, 2);

    // The audit log: who, when, what (a digest), how many; never an identifier or event id in clear.
    const audit = await cliJson(dataDir, ['deletions', 'shop']);
    assert.deepEqual(audit.map((r: { kind: string }) => r.kind), ['forget_identifier', 'delete_event', 'forget_identifier']);
    assert.equal(audit[2].actor, 'dpo@example.com');
    assert.match(audit[2].target_digest, /^[0-9a-f]{64}$/);
    assert.notEqual(audit[2].target_digest, A);
    const auditText = JSON.stringify(audit);
    for (const secret of [A, P, C, 'solo-1']) assert.ok(!auditText.includes(secret), 'no identifier in clear in the audit log');
    if (embedded) {
      const lifecycleFile = readFileSync(join(dataDir, 'production', 'lifecycle.db'));
      for (const secret of [A, C, 'solo-1']) assert.ok(!lifecycleFile.includes(secret), 'nor in lifecycle.db once done');
    }
  } finally {
    assert.equal(await server.stop(), 0);
  }
  // Logs carry counts, never the identifiers.
  assert.doesNotMatch(server.output(), /[0-9a-f]{64}|solo-1/);
  assert.match(server.output(), /"msg":"deletion request done"/);
});
