/**
 * setCredentials(): rotating the secret (and key id) of a live client, against a scripted loopback
 * HTTPS server that verifies each request's HMAC with the key id and secret it holds now and
 * switches them as a rotation would. Requests after the call are signed with the new ones; a retry
 * of a request in flight across the rotation is too (the same bytes); a 401 to an attempt signed
 * with credentials replaced since is retried once with the new ones. Checked like the constructor's
 * options, and the secret shows nowhere.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { inspect } from 'node:util';
import { getHeapSnapshot } from 'node:v8';
import { Client, sign, type RetryInfo } from '../src/index.js';
import { scripted, type Reply, type Seen } from './helpers/https-test-server.js';

const ev = (id: string) => ({ id, timestamp: 1746558464, event_type: 'page_view' as const });
const MISMATCH = 'signature does not match: compute HMAC-SHA256 over the exact body bytes sent, keyed by the current secret';

/** The server's view of the key: what it verifies with now (a rotation without grace switches it). */
interface Key {
  keyId: string;
  secret: string;
}
/** 200 when the request is signed by `key` under its key id, else the service's 401. */
function verify(seen: Seen, key: Key): Reply {
  const ok = seen.headers['x-service-key-id'] === key.keyId && seen.headers['x-service-signature'] === sign(seen.body, key.secret);
  return ok ? { status: 200, body: { accepted: seen.events.length } } : { status: 401, body: { error: MISMATCH } };
}

test('requests after setCredentials() are signed with the new secret, and the new key id when given', async () => {
  const key: Key = { keyId: 'key_1', secret: 'sk_1' };
  const s = await scripted((seen) => verify(seen, key));
  const c = s.client();
  try {
    assert.equal((await c.send([ev('a')])).accepted, 1);
    // The service rotates (no grace): the old secret no longer verifies.
    key.secret = 'sk_2';
    c.setCredentials({ secret: 'sk_2' });
    const r2 = await c.send([ev('b')]);
    assert.deepEqual([r2.accepted, r2.failure], [1, undefined], JSON.stringify(r2.results));
    assert.equal(c.keyId, 'key_1', 'a rotation keeps the key id');
    // A new key altogether.
    Object.assign(key, { keyId: 'key_2', secret: 'sk_3' });
    c.setCredentials({ keyId: 'key_2', secret: 'sk_3' });
    assert.equal((await c.send([ev('c')])).accepted, 1);
    assert.equal(c.keyId, 'key_2');
    assert.deepEqual(
      s.seen.map((x) => [x.headers['x-service-key-id'], x.headers['x-service-signature']]),
      [['key_1', sign(s.seen[0]!.body, 'sk_1')], ['key_1', sign(s.seen[1]!.body, 'sk_2')], ['key_2', sign(s.seen[2]!.body, 'sk_3')]],
    );
    assert.equal(s.seen.length, 3, 'no 401, no retry');
  } finally {
    await c.close();
    await s.close();
  }
});

test('a retry after a 500 that straddles the rotation is signed with the new secret; the bytes are the same', async () => {
  const key: Key = { keyId: 'key_1', secret: 'sk_1' };
  let c: Client | undefined;
  const s = await scripted((seen, n) => {
    if (n > 0) return verify(seen, key);
    // While the first attempt is in flight, the key is rotated on both sides; then it fails with a 500.
    key.secret = 'sk_2';
    c!.setCredentials({ secret: 'sk_2' });
    return { status: 500, body: { error: 'ingest backend unavailable' } };
  });
  c = s.client();
  try {
    const r = await c.send([ev('a'), ev('b')]);
    assert.deepEqual([r.accepted, r.retries, r.requests, r.failure], [2, 1, 2, undefined], JSON.stringify(r.results));
    const [first, second] = s.seen;
    assert.ok(first!.body.equals(second!.body), 'the retry sent the same bytes');
    assert.equal(first!.headers['x-service-signature'], sign(first!.body, 'sk_1'));
    assert.equal(second!.headers['x-service-signature'], sign(second!.body, 'sk_2'));
  } finally {
    await c.close();
    await s.close();
  }
});

test('track(): a batch held before setCredentials() is sent signed with the new secret', async () => {
  const key: Key = { keyId: 'key_1', secret: 'sk_2' };
  const s = await scripted((seen) => verify(seen, key));
  const c = s.client({ flushIntervalMs: 3_600_000 });
  try {
    c.track(ev('a'));
    c.setCredentials({ secret: 'sk_2' });
    const stats = await c.flush();
    assert.deepEqual([stats.accepted, stats.undeliverable], [1, 0]);
    assert.equal(s.seen[0]!.headers['x-service-signature'], sign(s.seen[0]!.body, 'sk_2'));
  } finally {
    await c.close();
    await s.close();
  }
});

test('a 401 to a request signed before the rotation is retried once with the new secret, instead of stopping the send', async () => {
  const key: Key = { keyId: 'key_1', secret: 'sk_1' };
  const retries: RetryInfo[] = [];
  let c: Client | undefined;
  const s = await scripted((seen, n) => {
    // The first request is in flight when the sender rotates; the service, past the grace, refuses its old signature.
    if (n === 0) {
      key.secret = 'sk_2';
      c!.setCredentials({ secret: 'sk_2' });
    }
    return verify(seen, key);
  });
  c = s.client({ maxEventsPerRequest: 1, concurrency: 1, onRetry: (info) => retries.push(info) });
  try {
    const r = await c.send([ev('a'), ev('b')]);
    assert.deepEqual([r.accepted, r.failure, r.retries, r.requests], [2, undefined, 1, 3], JSON.stringify(r.results));
    assert.deepEqual(s.seen.map((x) => [x.events[0]!.id, x.headers['x-service-signature'] === sign(x.body, 'sk_2')]), [['a', false], ['a', true], ['b', true]]);
    assert.equal(retries.length, 1);
    const info = retries[0]!;
    assert.deepEqual([info.reason, info.status, info.delayMs, info.retry, info.error.code, info.error.message], ['credentials-changed', 401, 0, 1, 'AUTHENTICATION', `401 ${MISMATCH}`]);
  } finally {
    await c.close();
    await s.close();
  }
});

test('a 401 is retried for a rotation at most once per request; a 401 under unchanged credentials stops the send at once', async () => {
  // Every answer is a 401, and the sender rotates during each of the first three attempts: one retry, then the send stops.
  let c: Client | undefined;
  let rotations = 0;
  const s = await scripted(() => {
    if (rotations < 3) c!.setCredentials({ secret: `sk_rotated_${++rotations}` });
    return { status: 401, body: { error: MISMATCH } };
  });
  c = s.client({ maxEventsPerRequest: 1, concurrency: 1 });
  try {
    const r = await c.send([ev('a'), ev('b')]);
    assert.deepEqual([r.undeliverable, r.requests, r.retries, s.seen.length], [2, 2, 1, 2], JSON.stringify(r.results));
    assert.deepEqual([r.failure?.code, r.failure?.message], ['AUTHENTICATION', `401 ${MISMATCH}`]);
  } finally {
    await c.close();
    await s.close();
  }
  // No rotation: the first 401 stops the send, not retried.
  const t = await scripted([{ status: 401, body: { error: MISMATCH } }]);
  const d = t.client({ maxEventsPerRequest: 1, concurrency: 1 });
  try {
    const r = await d.send([ev('a'), ev('b')]);
    assert.deepEqual([r.undeliverable, r.requests, r.retries, t.seen.length, r.failure?.code], [2, 1, 0, 1, 'AUTHENTICATION']);
  } finally {
    await d.close();
    await t.close();
  }
});

test('setCredentials() checks like the constructor, without echoing a value; a refused call changes nothing', async () => {
  const key: Key = { keyId: 'key_1', secret: 'sk_1' };
  const s = await scripted((seen) => verify(seen, key));
  const c = s.client();
  try {
    const bad: [unknown, RegExp][] = [
      [{ secret: '' }, /^TypeError: Client\.setCredentials: secret is required$/],
      [{}, /^TypeError: Client\.setCredentials: secret is required$/],
      [undefined, /^TypeError: Client\.setCredentials: secret is required$/],
      [{ secret: 42 }, /^TypeError: Client\.setCredentials: secret is required$/],
      [{ keyId: '', secret: 'sk_2' }, /^TypeError: Client\.setCredentials: keyId is required$/],
      [{ keyId: 'key_2\n', secret: 'sk_2' }, /^TypeError: Client\.setCredentials: keyId must be printable ASCII without leading or trailing whitespace \(it is sent as the X-Service-Key-Id header\); check for a trailing newline$/],
    ];
    for (const [value, message] of bad) {
      assert.throws(() => c.setCredentials(value as { secret: string }), (e: Error) => e instanceof TypeError && message.test(String(e)), JSON.stringify(value));
    }
    const r = await c.send([ev('a')]);
    assert.deepEqual([r.accepted, c.keyId], [1, 'key_1']);
    assert.equal(s.seen[0]!.headers['x-service-signature'], sign(s.seen[0]!.body, 'sk_1'), 'still signed with the first secret');
  } finally {
    await c.close();
    await s.close();
  }
  // The constructor's checks, in the same words.
  assert.throws(() => new Client({ baseUrl: 'https://127.0.0.1:1', keyId: 'k', secret: '', dataSetId: 'd' }), /^TypeError: Client: secret is required$/);
});

test('the secret shows nowhere: not in inspect, toString or JSON, and the replaced one is no longer held', async () => {
  // Secrets made here, held by no variable of the test once the client has them.
  const s = await scripted([{ status: 200, body: { accepted: 1 } }]);
  const first = () => `sk_${randomBytes(16).toString('hex')}`;
  const firstLength = first().length;
  const c = s.client({ secret: first() });
  let shown = '';
  try {
    assert.equal((await c.send([ev('a')])).accepted, 1);
    const used = s.seen[0]!;
    const second = `sk_${randomBytes(16).toString('hex')}`;
    c.setCredentials({ secret: second });
    shown = [inspect(c, { showHidden: true, depth: Infinity, getters: true }), String(c), JSON.stringify(c)].join('\n');
    assert.ok(!shown.includes(second), 'the current secret is not shown');
    assert.ok(!/sk_[0-9a-f]{32}/.test(shown), 'no secret is shown');
    // The heap holds no string that signs the first request's bytes as it was signed: the first
    // secret is gone (found through the signature it made, since no test variable holds it).
    const strings = await heapStrings();
    const candidates = strings.filter((x) => x.length === firstLength && /^sk_[0-9a-f]{32}$/.test(x));
    assert.ok(candidates.includes(second), 'the search finds a secret that is held');
    assert.deepEqual(candidates.filter((x) => sign(used.body, x) === used.headers['x-service-signature']), [], 'the replaced secret is still held');
  } finally {
    await c.close();
    await s.close();
  }
});

/** Every string in a heap snapshot of this process (a snapshot collects garbage first). */
async function heapStrings(): Promise<string[]> {
  const chunks: string[] = [];
  for await (const chunk of getHeapSnapshot()) chunks.push(String(chunk));
  return (JSON.parse(chunks.join('')) as { strings: string[] }).strings;
}
