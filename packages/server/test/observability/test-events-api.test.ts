/**
 * The test environment's list of attempts (issue 31 point 3), black-box against a real server:
 * requests refused as a whole (bad signature, invalid JSON, wrong Content-Type, gateway) appear
 * beside the per-event outcomes with their status, the message as sent, the key and data set when
 * known, the headers that matter (signature redacted) and, when the request authenticated, its
 * body masked; the filters and the reset a CI pipeline uses; the bound on unauthenticated entries.
 * Also issue 29 point 7: an identifier used as the event's `id` is masked like the same value in
 * `user_data`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { provision, startServer, tempDataDir } from '../helpers/server-process.js';
import { postSigned, request, sampleEvent } from '../helpers/https-client.js';
import { signBody } from '@ecapi-ingest/protocol';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { loadOpenApi } from '../helpers/openapi.js';

// Every entry served matches the OpenAPI document's TestEnvironmentEntry.
const DOC_ID = 'https://ecapi-ingest.dev/openapi.json';
const ajv = new Ajv2020({ strict: false, allErrors: true });
ajv.addSchema({ ...loadOpenApi(), $id: DOC_ID });
const validEntry = ajv.compile({ $ref: `${DOC_ID}#/components/schemas/TestEnvironmentEntry` });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Entry = Record<string, any>;

async function eventually<T>(what: string, check: () => Promise<T | null | undefined | false>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

test('test environment: requests refused as a whole are listed with their reason; filters and reset work', { timeout: 120_000 }, async () => {
  const dataDir = tempDataDir('ecapi-test-events-');
  const creds = await provision(dataDir, ['acme-web'], 'test');
  const server = await startServer({ dataDir, env: 'test', args: ['--workers', '1', '--no-worker'] });
  const admin = `http://127.0.0.1:${server.adminPort}`;
  const list = async (query = ''): Promise<Entry[]> => {
    const res = await fetch(`${admin}/api/test-events${query}`);
    assert.equal(res.status, 200, await res.clone().text());
    const events = ((await res.json()) as { events: Entry[] }).events;
    for (const e of events) assert.ok(validEntry(e), `${JSON.stringify(e)}: ${ajv.errorsText(validEntry.errors)}`);
    return events;
  };
  try {
    const good = sampleEvent('acme-web');
    assert.equal((await postSigned(server.port, server.ca, creds, 'acme-web', JSON.stringify(good))).status, 200);

    // 1. A bad signature: unauthenticated, so the key id is shown (it exists) but no body, and the signature redacted.
    const secretish = JSON.stringify(sampleEvent('acme-web', { user_data: { email_address: ['mary.bad-sig@example.com'] } }));
    const badSig = await request(server.port, server.ca, {
      body: secretish,
      headers: { 'content-type': 'application/json', 'x-service-key-id': creds.keyId, 'x-service-data-set': 'acme-web', 'x-service-signature': 'a'.repeat(64) },
    });
    assert.equal(badSig.status, 401);
    // 2. Invalid JSON, signed: authenticated, the message as sent.
    const invalid = await postSigned(server.port, server.ca, creds, 'acme-web', '{"events": [ {"id": "x",, } ]}');
    assert.equal(invalid.status, 400);
    // 3. A wrong Content-Type, signed: authenticated, its body kept masked (the email never shown).
    const leaky = sampleEvent('acme-web', { id: 'ann.ct@example.com', user_data: { email_address: ['ann.ct@example.com'] } });
    const wrongType = await postSigned(server.port, server.ca, creds, 'acme-web', JSON.stringify(leaky), { headers: { 'content-type': 'text/plain' } });
    assert.equal(wrongType.status, 400);
    // 4. The gateway: another path, and another version.
    const gateway = await request(server.port, server.ca, { method: 'GET', path: '/v1/other' });
    assert.equal(gateway.status, 403);
    const version = await request(server.port, server.ca, { method: 'POST', path: '/v2/events' });
    assert.equal(version.status, 404);

    const failed = await eventually('five failures', async () => {
      const events = await list('?outcome=failed');
      return events.length >= 5 ? events : null;
    });
    const byId = (id: string) => failed.find((e) => e.request_id === id)!;
    const sig = byId(badSig.headers['x-request-id'] as string);
    assert.equal(sig.status, 401);
    assert.equal(sig.outcome, 'failed');
    assert.equal(sig.error, badSig.json().error, 'the message exactly as sent');
    assert.equal(sig.error_code, 'SIGNATURE_MISMATCH');
    assert.equal(sig.authenticated, false);
    assert.equal(sig.key_id, creds.keyId);
    assert.equal(sig.data_set_id, 'acme-web');
    assert.equal(sig.headers['x-service-signature'], '‹redacted: 64 characters›');
    assert.equal(sig.headers['content-type'], 'application/json');
    assert.equal(sig.body, undefined, 'nothing of an unauthenticated body is kept');

    const inv = byId(invalid.headers['x-request-id'] as string);
    assert.equal(inv.status, 400);
    assert.equal(inv.error, invalid.json().error);
    assert.match(inv.error, /invalid JSON/);
    assert.equal(inv.authenticated, true);
    assert.equal(inv.key_id, creds.keyId);
    assert.match(inv.body_omitted, /does not parse/);

    const ct = byId(wrongType.headers['x-request-id'] as string);
    assert.equal(ct.status, 400);
    assert.equal(ct.error, wrongType.json().error);
    assert.equal(ct.headers['content-type'], 'text/plain');
    assert.equal(ct.authenticated, true);
    assert.equal(ct.body.events.length, 1);
    assert.equal(ct.body.events[0].event_type, 'purchase');

    const gw = byId(gateway.headers['x-request-id'] as string);
    assert.equal(gw.status, 403);
    assert.equal(gw.error, gateway.json().message);
    assert.equal(gw.path, '/v1/other');
    assert.equal(gw.method, 'GET');
    assert.equal(gw.error_code, 'MISSING_AUTH_TOKEN', 'gateway answers carry their code from the error reference too');
    const v2 = byId(version.headers['x-request-id'] as string);
    assert.equal(v2.status, 404);
    assert.equal(v2.error, version.json().error);
    assert.equal(v2.error_code, 'UNKNOWN_VERSION');

    // Never a plain identifier or the signature in what the API serves.
    const everything = JSON.stringify(await list());
    for (const secret of ['mary.bad-sig', 'ann.ct@', signBody(JSON.stringify(leaky), creds.secret)]) assert.ok(!everything.includes(secret), `${secret} not served`);

    // Filters: outcome, event type, since.
    const all = await list();
    assert.ok(all.some((e) => e.outcome === 'accepted' && e.event_id === good.id));
    assert.deepEqual(new Set((await list('?outcome=accepted')).map((e) => e.outcome)), new Set(['accepted']));
    assert.deepEqual(new Set((await list('?outcome=accepted,failed')).map((e) => e.outcome)), new Set(['accepted', 'failed']));
    assert.deepEqual((await list('?event_type=purchase')).map((e) => e.event_id), [good.id]);
    const newest = all[0]!.at as number;
    assert.ok((await list(`?since=${newest + 1}`)).length === 0);
    assert.ok((await list(`?since=${new Date(newest).toISOString()}`)).length >= 1);
    assert.equal((await fetch(`${admin}/api/test-events?outcome=good`)).status, 400);
    assert.equal((await fetch(`${admin}/api/test-events?since=yesterday`)).status, 400);

    // Reset: empty, and what comes after shows again.
    const reset = await fetch(`${admin}/api/test-events`, { method: 'DELETE' });
    assert.equal(reset.status, 200);
    assert.ok(((await reset.json()) as { removed: number }).removed >= 5);
    assert.deepEqual(await list(), []);
    await sleep(1500); // a serving process reports once a second: nothing from before the reset comes back
    assert.deepEqual(await list(), []);
    const after = sampleEvent('acme-web');
    assert.equal((await postSigned(server.port, server.ca, creds, 'acme-web', JSON.stringify(after))).status, 200);
    await eventually('the event after the reset', async () => (await list()).some((e) => e.event_id === after.id));
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

test('test environment: unauthenticated failures stay in a fixed ring and never push out a signed sender\'s entries', { timeout: 120_000 }, async () => {
  const dataDir = tempDataDir('ecapi-test-events-');
  const creds = await provision(dataDir, ['acme-web'], 'test');
  // No shedding of failed authentication here: the flood must reach the list.
  const server = await startServer({ dataDir, env: 'test', args: ['--failed-auth-burst', '100000', '--failed-auth-rps', '100000'] });
  const admin = `http://127.0.0.1:${server.adminPort}`;
  try {
    const good = sampleEvent('acme-web');
    assert.equal((await postSigned(server.port, server.ca, creds, 'acme-web', JSON.stringify(good))).status, 200);
    const long = 'k'.repeat(2000);
    for (let i = 0; i < 120; i++) {
      const res = await request(server.port, server.ca, {
        body: '{}',
        headers: { 'content-type': 'application/json', 'x-service-key-id': `${long}${i}`, 'x-service-data-set': long, 'x-service-signature': 'b'.repeat(64), 'user-agent': long },
      });
      assert.equal(res.status, 401);
    }
    const events = await eventually('the flood listed', async () => {
      const res = (await (await fetch(`${admin}/api/test-events`)).json()) as { events: Entry[] };
      return res.events.filter((e) => e.outcome === 'failed').length >= 50 ? res.events : null;
    });
    const failures = events.filter((e) => e.outcome === 'failed');
    assert.equal(failures.length, 50, 'a fixed ring of 50');
    assert.ok(events.some((e) => e.event_id === good.id), 'the signed sender\'s event is still listed');
    for (const f of failures) {
      assert.equal(f.key_id, null, 'an unknown key id is not promoted to key_id');
      assert.ok(f.headers['x-service-key-id'].length < 320 && f.headers['user-agent'].length < 320, 'header values cut');
    }
    assert.ok(JSON.stringify(failures).length < 50 * 2500, `bounded: ${JSON.stringify(failures).length} characters`);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

test('test environment: an email or phone number used as the event id is masked like the same value in user_data', { timeout: 120_000 }, async () => {
  const dataDir = tempDataDir('ecapi-test-events-');
  const creds = await provision(dataDir, ['acme-web'], 'test');
  const server = await startServer({ dataDir, env: 'test' });
  const admin = `http://127.0.0.1:${server.adminPort}`;
  try {
    const HASH = '7c8d08bf0d2dd2b8a6b3f1c0ffb0e5a94c1ddc2fe93c1bd0e8fa4e1470ba125e';
    // Accepted (a digest in user_data) with an email as its id; another with a + phone number as its id;
    // a rejected one whose id repeats its plain customer id; a random-number id stays shown.
    const byEmail = sampleEvent('acme-web', { id: 'jane.id@example.com', user_data: { email_address: [HASH] } });
    const byPhone = sampleEvent('acme-web', { id: '+1 (555) 010-4477' });
    const repeated = sampleEvent('acme-web', { id: 'CUST-889977', timestamp: undefined, user_data: { customer_identifier: 'CUST-889977' } });
    const plain = sampleEvent('acme-web', { id: '7361029384756' });
    const res = await postSigned(server.port, server.ca, creds, 'acme-web', JSON.stringify({ events: [byEmail, byPhone, repeated, plain] }));
    assert.equal(res.status, 207, res.text);
    const events = await eventually('four events', async () => {
      const body = (await (await fetch(`${admin}/api/test-events`)).json()) as { events: Entry[] };
      return body.events.length >= 4 ? body.events : null;
    });
    const text = JSON.stringify(events);
    for (const secret of ['jane.id@example.com', '555) 010-4477', 'CUST-889977']) assert.ok(!text.includes(secret), `${secret} not served: ${text}`);
    assert.ok(events.some((e) => e.event_id === '7361029384756'), 'an id of digits alone is shown');
    assert.ok(events.some((e) => /^‹not shown: 19 characters›$/.test(e.event_id) && e.outcome === 'accepted'), 'the email id masked');
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

test('the production console names the test environment\'s real admin port, not a fixed 9465', { timeout: 120_000 }, async () => {
  const dataDir = tempDataDir('ecapi-test-events-');
  const production = await startServer({ dataDir });
  const reason = async () => ((await (await fetch(`http://127.0.0.1:${production.adminPort}/api/test-events`)).json()) as { reason: string }).reason;
  try {
    // Not running: its default port, and how to change it.
    assert.match(await reason(), /serve --env test; its admin port will be 9465 unless --admin-port says otherwise/);
    const testEnv = await startServer({ dataDir, env: 'test' });
    // The console's URL is printed once the test environment's node is wholly up (its consumer started).
    for (let i = 0; i < 100 && !testEnv.output().includes('Operator console:'); i++) await sleep(50);
    try {
      assert.notEqual(testEnv.adminPort, 9465);
      assert.ok((await reason()).includes(`running, admin port ${testEnv.adminPort}: http://127.0.0.1:${testEnv.adminPort}/console/`), await reason());
    } finally {
      const code = await testEnv.stop();
      assert.equal(code, 0, testEnv.output().slice(-3000));
    }
    // Stopped: its record is stale (the process is gone) and the default is named again.
    assert.match(await reason(), /will be 9465/);
  } finally {
    assert.equal(await production.stop(), 0);
  }
});
