/**
 * Hostile signatures (complementing test/http/public-endpoint.test.ts: uppercase, 63 characters,
 * `sha256=`, 10,000 characters and re-serialized JSON are covered there) and the authorization
 * matrix: for several keys and data sets, every combination in single events and in batches has
 * one exact outcome, every unauthorized one is 401 and queues nothing, and nothing is ever a 500.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { signBody } from '@ecapi-ingest/protocol';
import { cliJson, exportQueue, provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import { postSigned, request, sampleEvent, type Credentials } from '../helpers/https-client.js';

let server: ServerProcess;
let dataDir: string;
const keys: Record<string, Credentials & { grants: string[] }> = {};
const DATA_SETS = ['ds-a', 'ds-b', 'ds-c', 'ds-none'];
const unqueued = new Set<string>();

before(async () => {
  dataDir = tempDataDir();
  for (const ds of DATA_SETS) await cliJson(dataDir, ['data-set', 'create', ds]);
  keys.k_ab = { ...(await provision(dataDir, ['ds-a', 'ds-b'])), grants: ['ds-a', 'ds-b'] };
  keys.k_b = { ...(await provision(dataDir, ['ds-b'])), grants: ['ds-b'] };
  keys.k_c = { ...(await provision(dataDir, ['ds-c'])), grants: ['ds-c'] };
  const revoked = await provision(dataDir, ['ds-a']);
  await cliJson(dataDir, ['key', 'revoke', revoked.keyId]);
  keys.k_revoked = { ...revoked, grants: [] };
  server = await startServer({ dataDir, args: ['--no-worker', '--failed-auth-burst', '100000', '--failed-auth-rps', '100000'] });
});
after(async () => {
  const ids = new Set((await exportQueue(dataDir)).map((r) => r.event.id));
  for (const id of unqueued) assert.ok(!ids.has(id), `${id} was refused but is queued`);
  assert.equal(await server.stop(), 0);
});

const MALFORMED = { error: 'malformed X-Service-Signature: expected 64 lowercase hex characters (HMAC-SHA256 of the raw body)' };
const MISSING = { error: 'missing X-Service-Signature header' };
const MISMATCH = { error: 'signature does not match: compute HMAC-SHA256 over the exact body bytes sent, keyed by the current secret' };

describe('signatures', () => {
  let n = 0;
  const fresh = () => {
    const event = sampleEvent('ds-a', { id: `sig-${n++}` });
    unqueued.add(event.id as string);
    return JSON.stringify(event);
  };
  const send = (body: string, signature: string | string[] | undefined, http2: boolean) => {
    const headers: Record<string, string | string[]> = {
      'content-type': 'application/json', accept: 'application/json', 'x-service-key-id': keys.k_ab!.keyId, 'x-service-data-set': 'ds-a',
    };
    if (signature !== undefined) headers['x-service-signature'] = signature;
    return request(server.port, server.ca, { body, headers, http2 });
  };
  const cases: [string, (body: string) => string | string[], object][] = [
    ['two X-Service-Signature headers, both the right signature', (b) => [signBody(b, keys.k_ab!.secret), signBody(b, keys.k_ab!.secret)], MALFORMED],
    ['two headers, a wrong one and the right one', (b) => ['0'.repeat(64), signBody(b, keys.k_ab!.secret)], MALFORMED],
    // An empty (or all-blank) header value is no signature at all.
    ['empty signature (0 characters)', () => '', MISSING],
    ['64 spaces', () => ' '.repeat(64), MISSING],
    ['65 characters (right signature plus one)', (b) => signBody(b, keys.k_ab!.secret) + '0', MALFORMED],
    ['64 non-hex characters', () => 'g'.repeat(64), MALFORMED],
    ['one hex letter uppercased', (b) => {
      const s = signBody(b, keys.k_ab!.secret);
      const i = s.search(/[a-f]/);
      return s.slice(0, i) + s[i]!.toUpperCase() + s.slice(i + 1);
    }, MALFORMED],
    ['base64 of the HMAC', (b) => Buffer.from(signBody(b, keys.k_ab!.secret), 'hex').toString('base64'), MALFORMED],
    ['sha256= prefix on a valid signature', (b) => `sha256=${signBody(b, keys.k_ab!.secret)}`, MALFORMED],
    ['all zeros', () => '0'.repeat(64), MISMATCH],
    ['signature of the empty body', () => signBody('', keys.k_ab!.secret), MISMATCH],
    ['signature keyed by the key id instead of the secret', (b) => signBody(b, keys.k_ab!.keyId), MISMATCH],
    ['signature over the body with a trailing newline', (b) => signBody(b + '\n', keys.k_ab!.secret), MISMATCH],
    ['signature over re-serialized JSON with reordered keys', (b) => {
      const parsed = JSON.parse(b) as Record<string, unknown>;
      const reordered = Object.fromEntries(Object.entries(parsed).reverse());
      return signBody(JSON.stringify(reordered), keys.k_ab!.secret);
    }, MISMATCH],
  ];
  for (const [name, signature, expected] of cases) {
    for (const http2 of [false, true]) {
      test(`${name} (HTTP/${http2 ? '2' : '1.1'}): 401, never a 500`, async () => {
        const body = fresh();
        const sig = signature(body);
        const res = await send(body, sig, http2);
        assert.equal(res.status, 401, res.text);
        assert.deepEqual(res.json(), expected);
      });
    }
  }
  test('a correct signature with surrounding whitespace is tolerated (HTTP trims header values)', async () => {
    const body = fresh();
    unqueued.delete(JSON.parse(body).id);
    const res = await send(body, `  ${signBody(body, keys.k_ab!.secret)}\t`, false);
    assert.equal(res.status, 200, res.text);
  });
});

describe('authorization matrix', () => {
  const authorizedFor = (key: string, ds: string) => keys[key]!.grants.includes(ds);
  const NOT_AUTHORIZED = (ds: string) => ({ error: `principal not authorized for data_set_id ${ds}` });
  const REVOKED = { error: 'key id in X-Service-Key-Id has been revoked' };
  let n = 0;

  for (const key of ['k_ab', 'k_b', 'k_c', 'k_revoked']) {
    test(`key ${key}: every (header data set, event data set) pair, single and batch`, async () => {
      const creds = keys[key]!;
      for (const header of [...DATA_SETS, 'ds-missing']) {
        for (const target of [...DATA_SETS, 'ds-missing']) {
          // Single event.
          const single = sampleEvent(target, { id: `m-${n++}` });
          const s = await postSigned(server.port, server.ca, creds, header, JSON.stringify(single), { http2: n % 2 === 0 });
          // Batch: one event for the header's data set, one for the target.
          const own = sampleEvent(header, { id: `m-${n++}` });
          const other = sampleEvent(target, { id: `m-${n++}` });
          const b = await postSigned(server.port, server.ca, creds, header, JSON.stringify({ events: [own, other] }), { http2: n % 2 === 1 });
          const where = `${key} header=${header} event=${target}`;

          if (key === 'k_revoked') {
            for (const res of [s, b]) {
              assert.equal(res.status, 401, where);
              assert.deepEqual(res.json(), REVOKED, where);
            }
            for (const e of [single, own, other]) unqueued.add(e.id as string);
            continue;
          }
          if (!authorizedFor(key, header)) {
            for (const res of [s, b]) {
              assert.equal(res.status, 401, where);
              assert.deepEqual(res.json(), NOT_AUTHORIZED(header), where);
            }
            for (const e of [single, own, other]) unqueued.add(e.id as string);
            continue;
          }
          if (target === header) {
            assert.equal(s.status, 200, where);
            assert.equal(b.status, 200, where);
            assert.deepEqual(b.json(), { accepted: 2 });
            continue;
          }
          if (!authorizedFor(key, target)) {
            // Any event for a data set the key may not write refuses the whole request.
            for (const res of [s, b]) {
              assert.equal(res.status, 401, where);
              assert.deepEqual(res.json(), NOT_AUTHORIZED(target), where);
            }
            for (const e of [single, own, other]) unqueued.add(e.id as string);
            continue;
          }
          // Authorized for both, but the event's data set differs from the header's: that event alone.
          const mismatch = 'invalid field data_set_id: must equal X-Service-Data-Set';
          assert.equal(s.status, 400, where);
          assert.deepEqual(s.json(), { accepted: 0, rejected: 1, errors: [{ index: 0, event_id: single.id, error: mismatch }] });
          assert.equal(b.status, 207, where);
          assert.deepEqual(b.json(), { accepted: 1, rejected: 1, errors: [{ index: 1, event_id: other.id, error: mismatch }] });
          unqueued.add(single.id as string).add(other.id as string);
        }
      }
    });
  }

  test('a grant removed at run time takes effect: 401 and nothing queued', async () => {
    await cliJson(dataDir, ['grant', 'remove', keys.k_ab!.keyId, 'ds-b']);
    keys.k_ab!.grants = ['ds-a'];
    await new Promise((r) => setTimeout(r, 800)); // control poll: 200 ms
    const event = sampleEvent('ds-b', { id: 'after-grant-removed' });
    unqueued.add('after-grant-removed');
    const res = await postSigned(server.port, server.ca, keys.k_ab!, 'ds-b', JSON.stringify(event));
    assert.equal(res.status, 401);
    assert.deepEqual(res.json(), NOT_AUTHORIZED('ds-b'));
  });
});
