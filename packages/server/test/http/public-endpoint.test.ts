/**
 * Black-box: the real server process over real TLS 1.3, HTTP/1.1 and HTTP/2. Every status code and
 * message of the interface spec's POST /v1/events, its limits and its gateway rules.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { signBody } from '@ecapi-ingest/protocol';
import { cliJson, exportQueue, provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import { postSigned, request, sampleEvent, type Credentials } from '../helpers/https-client.js';

let server: ServerProcess;
let dataDir: string;
let creds: Credentials;
let other: Credentials;
const DS = 'shop-eu';
const DS2 = 'shop-us';
const DS_FOREIGN = 'someone-else';

before(async () => {
  dataDir = tempDataDir();
  creds = await provision(dataDir, [DS, DS2]);
  other = await provision(dataDir, [DS_FOREIGN]);
  server = await startServer({ dataDir });
});
after(async () => {
  assert.equal(await server.stop(), 0, 'server exits 0 on SIGTERM');
});

const post = (body: string | Buffer, options: Parameters<typeof postSigned>[5] = {}, c: Credentials = creds, ds = DS) =>
  postSigned(server.port, server.ca, c, ds, body, options);

for (const http2 of [false, true]) {
  describe(`over HTTP/${http2 ? '2' : '1.1'}`, () => {
    test('200 for one bare event, with X-Request-Id, and the event is in the queue', async () => {
      const event = sampleEvent(DS);
      const res = await post(JSON.stringify(event), { http2 });
      assert.equal(res.status, 200);
      assert.deepEqual(res.json(), { accepted: 1 });
      assert.equal(res.headers['content-type'], 'application/json');
      const requestId = res.headers['x-request-id'] as string;
      assert.match(requestId, /^[0-9a-f-]{36}$/);
      const records = await exportQueue(dataDir);
      const record = records.find((r) => r.event.id === event.id);
      assert.ok(record, 'accepted event is queued');
      assert.equal(record.request_id, requestId);
      assert.equal(record.key_id, creds.keyId);
      assert.equal(record.data_set_id, DS);
      assert.deepEqual(record.event, event);
    });

    test('200 for a batch with accepted equal to the number of events', async () => {
      const events = Array.from({ length: 5 }, () => sampleEvent(DS));
      const res = await post(JSON.stringify({ events }), { http2 });
      assert.equal(res.status, 200);
      assert.deepEqual(res.json(), { accepted: 5 });
    });

    test('403 Missing Authentication Token for another path, with the gateway error type', async () => {
      const res = await request(server.port, server.ca, { method: 'POST', path: '/v1/event', body: '{}', http2 });
      assert.equal(res.status, 403);
      assert.deepEqual(res.json(), { message: 'Missing Authentication Token' });
      assert.equal(res.headers['x-amzn-errortype'], 'MissingAuthenticationTokenException');
    });

    test('403 for GET /v1/events, credentials not evaluated', async () => {
      const res = await request(server.port, server.ca, {
        method: 'GET',
        path: '/v1/events',
        http2,
        headers: { 'x-service-key-id': 'nope', 'x-service-signature': 'bad' },
      });
      assert.equal(res.status, 403);
      assert.deepEqual(res.json(), { message: 'Missing Authentication Token' });
    });

    test('403 with the hashed Authorization header when one is present', async () => {
      const authorization = 'Bearer abc.def';
      const res = await request(server.port, server.ca, { method: 'PUT', path: '/v1/events', http2, headers: { authorization } });
      assert.equal(res.status, 403);
      const hash = createHash('sha256').update(authorization).digest('base64');
      assert.deepEqual(res.json(), {
        message: `Invalid key=value pair (missing equal-sign) in Authorization header (hashed with SHA-256 and encoded with Base64): '${hash}'`,
      });
      assert.equal(res.headers['x-amzn-errortype'], 'IncompleteSignatureException');
    });

    test('404 for another version segment', async () => {
      for (const path of ['/v2/events', '/v0/events', '/vX/events?x=1']) {
        const res = await request(server.port, server.ca, { method: 'POST', path, body: '{}', http2 });
        assert.equal(res.status, 404, path);
        assert.match(res.json().error, /v1/);
      }
    });

    test('the query string is ignored on the valid endpoint', async () => {
      const body = JSON.stringify(sampleEvent(DS));
      const res = await postSigned(server.port, server.ca, creds, DS, body, { http2, path: '/v1/events?debug=1' });
      assert.equal(res.status, 200);
    });
  });
}

/** What every 401 says in WWW-Authenticate (docs/decisions.md). */
const CHALLENGE = 'HMAC-SHA256 realm="/v1/events", headers="X-Service-Key-Id X-Service-Data-Set X-Service-Signature"';

describe('authentication (401)', () => {
  const body = JSON.stringify(sampleEvent(DS));
  const base = () => ({
    'content-type': 'application/json',
    accept: 'application/json',
    'x-service-key-id': creds.keyId,
    'x-service-data-set': DS,
    'x-service-signature': signBody(body, creds.secret),
  });
  const send = (headers: Record<string, string>) => request(server.port, server.ca, { body, headers });
  const without = (name: string) => {
    const h: Record<string, string> = base();
    delete h[name];
    return h;
  };

  const cases: [string, () => Record<string, string>, string][] = [
    ['bearer token', () => ({ ...base(), authorization: 'Bearer token123' }), 'bearer-token authentication is not enabled: sign the body and send X-Service-Key-Id and X-Service-Signature'],
    ['missing key id', () => without('x-service-key-id'), 'missing X-Service-Key-Id header'],
    ['missing data set header', () => without('x-service-data-set'), 'missing X-Service-Data-Set header'],
    ['missing signature', () => without('x-service-signature'), 'missing X-Service-Signature header'],
    ['uppercase signature', () => ({ ...base(), 'x-service-signature': signBody(body, creds.secret).toUpperCase() }), 'malformed X-Service-Signature: expected 64 lowercase hex characters (HMAC-SHA256 of the raw body)'],
    ['63-char signature', () => ({ ...base(), 'x-service-signature': signBody(body, creds.secret).slice(1) }), 'malformed X-Service-Signature: expected 64 lowercase hex characters (HMAC-SHA256 of the raw body)'],
    ['sha256= prefix', () => ({ ...base(), 'x-service-signature': 'sha256=' + signBody(body, creds.secret) }), 'malformed X-Service-Signature: expected 64 lowercase hex characters (HMAC-SHA256 of the raw body)'],
    ['10,000-char signature', () => ({ ...base(), 'x-service-signature': 'a'.repeat(10_000) }), 'malformed X-Service-Signature: expected 64 lowercase hex characters (HMAC-SHA256 of the raw body)'],
    ['unknown key', () => ({ ...base(), 'x-service-key-id': 'key_doesnotexist' }), 'unknown key id in X-Service-Key-Id'],
    ['wrong secret', () => ({ ...base(), 'x-service-signature': signBody(body, 'not-the-secret') }), 'signature does not match: compute HMAC-SHA256 over the exact body bytes sent, keyed by the current secret'],
    ['signature over re-serialized JSON', () => ({ ...base(), 'x-service-signature': signBody(JSON.stringify(JSON.parse(body), null, 2), creds.secret) }), 'signature does not match: compute HMAC-SHA256 over the exact body bytes sent, keyed by the current secret'],
    ['another key\'s secret', () => ({ ...base(), 'x-service-signature': signBody(body, other.secret) }), 'signature does not match: compute HMAC-SHA256 over the exact body bytes sent, keyed by the current secret'],
    ['data set the key has no grant for', () => ({ ...base(), 'x-service-data-set': DS_FOREIGN }), `principal not authorized for data_set_id ${DS_FOREIGN}`],
    ['data set that does not exist', () => ({ ...base(), 'x-service-data-set': 'no-such-set' }), 'principal not authorized for data_set_id no-such-set'],
  ];
  for (const [name, headers, message] of cases) {
    test(name, async () => {
      const res = await send(headers());
      assert.equal(res.status, 401);
      assert.deepEqual(res.json(), { error: message });
      assert.ok(res.headers['x-request-id']);
      assert.equal(res.headers['www-authenticate'], CHALLENGE, 'a 401 carries its challenge (RFC 9110 15.5.2)');
    });
  }

  test('a batch with any event for an unauthorized data set is refused whole, and nothing is queued', async () => {
    const events = [sampleEvent(DS), sampleEvent(DS_FOREIGN), sampleEvent(DS)];
    const res = await post(JSON.stringify({ events }));
    assert.equal(res.status, 401);
    assert.deepEqual(res.json(), { error: `principal not authorized for data_set_id ${DS_FOREIGN}` });
    assert.equal(res.headers['www-authenticate'], CHALLENGE);
    const ids = new Set((await exportQueue(dataDir)).map((r) => r.event.id));
    for (const e of events) assert.ok(!ids.has(e.id as string));
  });
});

describe('request-level 400', () => {
  test('Content-Type other than application/json', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/json; charset=latin1']) {
      const res = await post(JSON.stringify(sampleEvent(DS)), { headers: { 'content-type': type } });
      assert.equal(res.status, 400, type);
      assert.deepEqual(res.json(), { error: 'unsupported Content-Type: send Content-Type: application/json' });
    }
    const ok = await post(JSON.stringify(sampleEvent(DS)), { headers: { 'content-type': 'application/json; charset=utf-8' } });
    assert.equal(ok.status, 200);
  });

  test('Accept that excludes application/json; */* and absent Accept are fine', async () => {
    const res = await post(JSON.stringify(sampleEvent(DS)), { headers: { accept: 'text/html' } });
    assert.equal(res.status, 400);
    assert.deepEqual(res.json(), { error: 'Accept header excludes application/json: responses are application/json only' });
    const q0 = await post(JSON.stringify(sampleEvent(DS)), { headers: { accept: 'application/json;q=0, text/html' } });
    assert.equal(q0.status, 400);
    assert.equal((await post(JSON.stringify(sampleEvent(DS)), { headers: { accept: '*/*' } })).status, 200);
  });

  const bodies: [string, string | Buffer, string][] = [
    ['invalid JSON', '{"data_set_id": ', 'invalid JSON: '],
    ['empty body', '', 'invalid JSON: empty body'],
    ['invalid UTF-8', Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]), 'invalid JSON: body is not valid UTF-8'],
    ['__proto__ key', '{"events":[{"data_set_id":"shop-eu","__proto__":{"polluted":true}}]}', 'invalid JSON: keys "__proto__" and "constructor.prototype" are not allowed'],
    ['constructor.prototype', '{"data_set_id":"shop-eu","ext":{"constructor":{"prototype":{"x":1}}}}', 'invalid JSON: keys "__proto__" and "constructor.prototype" are not allowed'],
    ['null', 'null', 'payload must be an object or {events:[...]}'],
    ['a bare array', '[{"data_set_id":"shop-eu"}]', 'payload must be an object or {events:[...]}'],
    ['a string', '"hello"', 'payload must be an object or {events:[...]}'],
    ['events not an array', '{"events":{"data_set_id":"shop-eu"}}', 'payload must be an object or {events:[...]}'],
    ['events wrapper with another key', '{"events":[],"extra":1}', 'payload must be an object or {events:[...]}'],
    ['empty events', '{"events":[]}', 'no events in payload'],
  ];
  for (const [name, body, message] of bodies) {
    test(name, async () => {
      const res = await post(body);
      assert.equal(res.status, 400);
      const error = res.json().error as string;
      if (message.endsWith(': ')) assert.ok(error.startsWith(message) && error.length > message.length, error);
      else assert.equal(error, message);
      assert.ok(!error.includes('data_set_id": '), 'the detail does not echo the body');
      assert.equal(({} as any).polluted, undefined, 'Object.prototype untouched');
    });
  }

  test('1,000 events are accepted, 1,001 are refused', async () => {
    const thousand = Array.from({ length: 1000 }, () => sampleEvent(DS));
    const ok = await post(JSON.stringify({ events: thousand }));
    assert.equal(ok.status, 200);
    assert.deepEqual(ok.json(), { accepted: 1000 });
    const over = await post(JSON.stringify({ events: [...thousand, sampleEvent(DS)] }));
    assert.equal(over.status, 400);
    assert.deepEqual(over.json(), { error: 'batch exceeds 1000 events' });
  });
});

describe('the 1 MiB limit', () => {
  /** A single valid event whose JSON is exactly `size` bytes, padded inside ext. */
  const eventOfSize = (size: number) => {
    const event = sampleEvent(DS, { ext: { pad: '' } });
    const base = Buffer.byteLength(JSON.stringify(event));
    (event.ext as { pad: string }).pad = 'x'.repeat(size - base);
    const text = JSON.stringify(event);
    assert.equal(Buffer.byteLength(text), size);
    return { event, text };
  };

  test('exactly 1,048,576 bytes is accepted and queued intact', async () => {
    const { event, text } = eventOfSize(1_048_576);
    const res = await post(text);
    assert.equal(res.status, 200, res.text);
    const record = (await exportQueue(dataDir)).find((r) => r.event.id === event.id);
    assert.equal(record?.event.ext.pad.length, (event.ext as { pad: string }).pad.length);
  });

  test('1,048,577 bytes is refused (Content-Length)', async () => {
    const res = await post(eventOfSize(1_048_577).text);
    assert.equal(res.status, 400);
    assert.deepEqual(res.json(), { error: 'payload exceeds 1 MB limit' });
  });

  test('1,048,577 bytes is refused when sent chunked, and 1,048,576 chunked is accepted', async () => {
    const over = await post(eventOfSize(1_048_577).text, { chunked: 64 * 1024 });
    assert.equal(over.status, 400);
    assert.deepEqual(over.json(), { error: 'payload exceeds 1 MB limit' });
    const exact = await post(eventOfSize(1_048_576).text, { chunked: 64 * 1024 });
    assert.equal(exact.status, 200);
  });

  test('refused over HTTP/2 too', async () => {
    const res = await post(eventOfSize(1_048_577).text, { http2: true });
    assert.equal(res.status, 400);
    assert.deepEqual(res.json(), { error: 'payload exceeds 1 MB limit' });
  });

  test('a huge announced Content-Length is refused before any body is read', async () => {
    const res = await request(server.port, server.ca, {
      headers: { 'content-length': String(50 * 1024 * 1024), 'content-type': 'application/json' },
      body: undefined,
    });
    assert.equal(res.status, 400);
    assert.deepEqual(res.json(), { error: 'payload exceeds 1 MB limit' });
  });
});

describe('per-event outcomes', () => {
  test('207 with the right indexes and event_ids for a mixed batch; only the good events are queued', async () => {
    const good1 = sampleEvent(DS);
    const bad1 = sampleEvent(DS);
    delete bad1.timestamp;
    const good2 = sampleEvent(DS);
    const bad2 = { ...sampleEvent(DS2), id: 'evt-other-set' };
    const bad3 = sampleEvent(DS);
    delete bad3.id;
    delete bad3.event_type;
    const events = [good1, bad1, good2, bad2, bad3];
    const res = await post(JSON.stringify({ events }));
    assert.equal(res.status, 207);
    assert.deepEqual(res.json(), {
      accepted: 2,
      rejected: 3,
      errors: [
        { index: 1, event_id: bad1.id, error: 'missing required field: timestamp' },
        { index: 3, event_id: 'evt-other-set', error: 'invalid field data_set_id: must equal X-Service-Data-Set' },
        { index: 4, event_id: null, error: 'missing required field: event_type' },
      ],
    });
    const ids = new Set((await exportQueue(dataDir)).map((r) => r.event.id));
    assert.ok(ids.has(good1.id as string) && ids.has(good2.id as string));
    assert.ok(!ids.has(bad1.id as string) && !ids.has('evt-other-set'));
  });

  test('an empty data_set_id is that event\'s invalid field, not a batch the key may not write', async () => {
    const good = sampleEvent(DS);
    const empty: Record<string, unknown> = { ...sampleEvent(DS), data_set_id: '' };
    const res = await post(JSON.stringify({ events: [good, empty] }));
    assert.equal(res.status, 207);
    assert.deepEqual(res.json(), {
      accepted: 1,
      rejected: 1,
      errors: [{ index: 1, event_id: empty.id, error: 'invalid field data_set_id: must be a non-empty string' }],
    });
    const ids = new Set((await exportQueue(dataDir)).map((r) => r.event.id));
    assert.ok(ids.has(good.id as string) && !ids.has(empty.id as string));
  });

  test('400 with the multi-status shape when every event fails', async () => {
    const a = sampleEvent(DS);
    delete a.data_set_id;
    const b = 42;
    const res = await post(JSON.stringify({ events: [a, b] }));
    assert.equal(res.status, 400);
    assert.deepEqual(res.json(), {
      accepted: 0,
      rejected: 2,
      errors: [
        { index: 0, event_id: a.id, error: 'missing required field: data_set_id' },
        { index: 1, event_id: null, error: 'schema validation failed: event must be a JSON object' },
      ],
    });
  });

  test('null on an optional field is queued as absent; a BOM-prefixed body is queued intact', async () => {
    const withNull = sampleEvent(DS, { source: null, properties: null });
    const res = await post(JSON.stringify(withNull));
    assert.equal(res.status, 200);
    const plain = sampleEvent(DS);
    const bom = await post(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify(plain))]));
    assert.equal(bom.status, 200);
    const records = await exportQueue(dataDir);
    const stored = records.find((r) => r.event.id === withNull.id)!.event;
    assert.equal('source' in stored, false);
    assert.equal('properties' in stored, false);
    assert.equal(stored.event_type, 'purchase');
    assert.deepEqual(records.find((r) => r.event.id === plain.id)!.event, plain);
  });

  test('a key granted two data sets writes to each through its own header', async () => {
    const res = await post(JSON.stringify(sampleEvent(DS2)), {}, creds, DS2);
    assert.equal(res.status, 200);
  });
});

describe('admin port', () => {
  test('healthz, readyz and metrics reflect the traffic', async () => {
    const base = `http://127.0.0.1:${server.adminPort}`;
    assert.equal((await fetch(`${base}/healthz`)).status, 200);
    const ready = await fetch(`${base}/readyz`);
    assert.equal(ready.status, 200);
    assert.equal(((await ready.json()) as { ready: boolean }).ready, true);
    const metrics = await (await fetch(`${base}/metrics`)).text();
    assert.match(metrics, /ecapi_requests_total\{status="200"\} [1-9]/);
    assert.match(metrics, /ecapi_requests_total\{status="401"\} [1-9]/);
    assert.match(metrics, /ecapi_events_rejected_total\{reason="missing_field"\} [1-9]/);
    assert.match(metrics, /ecapi_queue_append_seconds_count [1-9]/);
    assert.match(metrics, /ecapi_queue_commit_batch_events_count [1-9]/);
  });

  test('nothing but POST /v1/events is served on the public port', async () => {
    for (const path of ['/healthz', '/metrics', '/readyz']) {
      const res = await request(server.port, server.ca, { method: 'GET', path });
      assert.equal(res.status, 403, path);
    }
  });
});

describe('logs', () => {
  test('one line per request with status and counts, never a secret, signature, body or identifier', async () => {
    const marker = `marker-${Date.now()}`;
    const event = sampleEvent(DS, { id: marker, user_data: { email_address: ['b4c9a289323b21a01c3e940f150eb9b8c542587f1abfd8f0e1cc1ffc5e475514'] } });
    const body = JSON.stringify(event);
    const res = await post(body);
    assert.equal(res.status, 200);
    const requestId = res.headers['x-request-id'] as string;
    await new Promise((r) => setTimeout(r, 300));
    const output = server.output();
    const line = output.split('\n').find((l) => l.includes(requestId));
    assert.ok(line, 'a log line carries the request id');
    const parsed = JSON.parse(line);
    assert.equal(parsed.status, 200);
    assert.equal(parsed.accepted, 1);
    assert.equal(parsed.key_id, creds.keyId);
    assert.equal(parsed.data_set_id, DS);
    assert.equal(typeof parsed.latency_ms, 'number');
    for (const secretish of [creds.secret, other.secret, signBody(body, creds.secret), marker, 'b4c9a289323b21a01c3e940f150eb9b8c542587f1abfd8f0e1cc1ffc5e475514']) {
      assert.ok(!output.includes(secretish), 'log output must not contain secrets, signatures or event contents');
    }
  });
});

test('control plane view: key list never prints secrets', async () => {
  const keys = await cliJson<any[]>(dataDir, ['key', 'list']);
  assert.ok(keys.length >= 2);
  assert.ok(!JSON.stringify(keys).includes(creds.secret));
});
