/**
 * Property-based fuzzing (fast-check) of the public endpoint: valid requests mutated in their
 * bodies (bytes and JSON), headers and signatures. For every case: the status is one of the spec's,
 * the body has the spec's shape for that status, the process never crashes, and exactly what was
 * acknowledged is queued (matched by X-Request-Id: a 200/207 request has as many queued records as
 * it accepted; every other request has none). 300 cases, so that CI stays fast; set
 * ECAPI_FUZZ_RUNS for more and ECAPI_FUZZ_SEED to replay.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { signBody } from '@ecapi-ingest/protocol';
import { exportQueue, provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import { request, sampleEvent, type Credentials, type HttpResult } from '../helpers/https-client.js';

const DS = 'fuzz';
const RUNS = Number(process.env.ECAPI_FUZZ_RUNS ?? 300);
let server: ServerProcess;
let dataDir: string;
let creds: Credentials;
let otherKey: Credentials;

before(async () => {
  dataDir = tempDataDir();
  creds = await provision(dataDir, [DS]);
  otherKey = await provision(dataDir, ['fuzz-other']);
  server = await startServer({ dataDir, args: ['--no-worker', '--failed-auth-burst', '100000', '--failed-auth-rps', '100000'] });
});
after(async () => {
  assert.equal(await server.stop(), 0);
});

const FIELDS = ['data_set_id', 'id', 'timestamp', 'event_type', 'value', 'currency_code', 'source', 'user_data', 'properties', 'ext', 'custom_event', 'events'];
const HEADERS = ['content-type', 'accept', 'x-service-key-id', 'x-service-data-set', 'x-service-signature', 'authorization'];
const printable = (s: string) => s.replace(/[^\x20-\x7e]/g, 'x');

type BodyMutation =
  | { kind: 'none' }
  | { kind: 'truncate'; at: number }
  | { kind: 'insertByte'; at: number; byte: number }
  | { kind: 'replace'; at: number; text: string }
  | { kind: 'setField'; event: number; field: string; value: unknown }
  | { kind: 'deleteField'; event: number; field: string }
  | { kind: 'json'; value: unknown }
  | { kind: 'bytes'; bytes: Uint8Array }
  | { kind: 'wrap'; how: 'array' | 'events-object' | 'double' };

const bodyMutation: fc.Arbitrary<BodyMutation> = fc.oneof(
  { weight: 3, arbitrary: fc.constant({ kind: 'none' as const }) },
  fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('insertByte' as const), at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }) }),
  fc.record({ kind: fc.constant('replace' as const), at: fc.nat(), text: fc.constantFrom('"', '{', '}', ']', ',', ':', '\\', '1e400', 'null', '"__proto__":1,', '\u0000', '\ufeff', '\ud800', '-', 'tru') }),
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('setField' as const), event: fc.nat({ max: 4 }), field: fc.constantFrom(...FIELDS), value: fc.jsonValue({ maxDepth: 3 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('deleteField' as const), event: fc.nat({ max: 4 }), field: fc.constantFrom(...FIELDS) }) },
  fc.record({ kind: fc.constant('json' as const), value: fc.jsonValue({ maxDepth: 4 }) }),
  fc.record({ kind: fc.constant('bytes' as const), bytes: fc.uint8Array({ maxLength: 200 }) }),
  fc.record({ kind: fc.constant('wrap' as const), how: fc.constantFrom('array' as const, 'events-object' as const, 'double' as const) }),
);

type HeaderMutation = { kind: 'none' } | { kind: 'drop'; header: string } | { kind: 'set'; header: string; value: string };
const headerMutation: fc.Arbitrary<HeaderMutation> = fc.oneof(
  { weight: 4, arbitrary: fc.constant({ kind: 'none' as const }) },
  fc.record({ kind: fc.constant('drop' as const), header: fc.constantFrom(...HEADERS) }),
  fc.record({
    kind: fc.constant('set' as const),
    header: fc.constantFrom(...HEADERS),
    value: fc.oneof(fc.string({ maxLength: 80 }).map(printable), fc.constantFrom('application/json; charset=latin1', 'text/plain', '*/*', 'application/*', 'Bearer x', 'fuzz-other', 'key_unknown')),
  }),
);

type SignatureMode = 'final' | 'original' | 'random' | 'upper' | 'other-key' | 'none';
const signatureMode = fc.constantFrom<SignatureMode>('final', 'final', 'final', 'original', 'random', 'upper', 'other-key', 'none');

let counter = 0;

function applyBody(mutation: BodyMutation, events: Record<string, unknown>[], batch: boolean): Buffer {
  const doc = () => (batch ? { events } : events[0]);
  switch (mutation.kind) {
    case 'none':
      return Buffer.from(JSON.stringify(doc()));
    case 'setField':
    case 'deleteField': {
      const target = events[mutation.event % events.length]!;
      if (mutation.kind === 'setField') target[mutation.field] = mutation.value;
      else delete target[mutation.field];
      return Buffer.from(JSON.stringify(doc()));
    }
    case 'json':
      return Buffer.from(JSON.stringify(mutation.value) ?? 'null');
    case 'bytes':
      return Buffer.from(mutation.bytes);
    case 'wrap':
      return Buffer.from(JSON.stringify(mutation.how === 'array' ? [doc()] : mutation.how === 'events-object' ? { events: doc() } : { events: [{ events }] }));
    default: {
      const text = Buffer.from(JSON.stringify(doc()));
      const at = mutation.at % (text.length + 1);
      if (mutation.kind === 'truncate') return text.subarray(0, at);
      if (mutation.kind === 'insertByte') return Buffer.concat([text.subarray(0, at), Buffer.from([mutation.byte]), text.subarray(at)]);
      return Buffer.concat([text.subarray(0, at), Buffer.from(mutation.text, 'utf8'), text.subarray(at + 1)]);
    }
  }
}

const isInt = (v: unknown): v is number => Number.isInteger(v);

/** The spec's response bodies by status; returns the accepted count. */
function checkResponse(res: HttpResult): number {
  assert.ok([200, 207, 400, 401].includes(res.status), `status ${res.status}: ${res.text}`);
  assert.equal(res.headers['content-type'], 'application/json');
  assert.match(String(res.headers['x-request-id']), /^[0-9a-f-]{36}$/);
  const body = JSON.parse(res.text) as Record<string, unknown>;
  const keys = Object.keys(body).sort().join(',');
  const multiStatus = () => {
    assert.equal(keys, 'accepted,errors,rejected', res.text);
    assert.ok(isInt(body.accepted) && isInt(body.rejected) && Array.isArray(body.errors));
    assert.equal((body.errors as unknown[]).length, body.rejected);
    for (const e of body.errors as Record<string, unknown>[]) {
      assert.equal(Object.keys(e).sort().join(','), 'error,event_id,index');
      assert.ok(isInt(e.index) && (e.event_id === null || typeof e.event_id === 'string') && typeof e.error === 'string');
      assert.match(e.error as string, /^(schema validation failed: |missing required field: |invalid field |hashed field )/);
    }
  };
  switch (res.status) {
    case 200:
      assert.equal(keys, 'accepted');
      assert.ok(isInt(body.accepted) && body.accepted >= 1);
      return body.accepted as number;
    case 207:
      multiStatus();
      assert.ok((body.accepted as number) >= 1 && (body.rejected as number) >= 1);
      return body.accepted as number;
    case 400:
      if (keys === 'error') {
        assert.match(body.error as string, /^(invalid JSON: |payload must be an object or \{events:\[\.\.\.\]\}$|no events in payload$|batch exceeds 1000 events$|unsupported Content-Type|missing Content-Type header|Accept header excludes)/);
      } else {
        multiStatus();
        assert.equal(body.accepted, 0);
        assert.ok((body.rejected as number) >= 1);
      }
      return 0;
    default:
      assert.equal(keys, 'error');
      assert.equal(typeof body.error, 'string');
      return 0;
  }
}

test(`fuzz: ${RUNS} mutated requests get spec statuses and bodies; only what was acknowledged is queued`, { timeout: 300_000 }, async () => {
  const acknowledged = new Map<string, number>(); // request id -> accepted
  const refused = new Set<string>();
  const statuses = new Map<number, number>();
  await fc.assert(
    fc.asyncProperty(
      fc.record({ batch: fc.boolean(), count: fc.integer({ min: 1, max: 5 }), http2: fc.boolean() }),
      bodyMutation,
      headerMutation,
      signatureMode,
      async ({ batch, count, http2 }, bodyMut, headerMut, sigMode) => {
        const run = counter++;
        const events = Array.from({ length: batch ? count : 1 }, (_, j) => sampleEvent(DS, { id: `f${run}-${j}` }));
        const original = Buffer.from(JSON.stringify(batch ? { events } : events[0]));
        const body = applyBody(bodyMut, events, batch);
        const signature: Record<SignatureMode, () => string | undefined> = {
          final: () => signBody(body, creds.secret),
          original: () => signBody(original, creds.secret),
          random: () => signBody(String(Math.random()), creds.secret),
          upper: () => signBody(body, creds.secret).toUpperCase(),
          'other-key': () => signBody(body, otherKey.secret),
          none: () => undefined,
        };
        const headers: Record<string, string> = {
          'content-type': 'application/json',
          accept: 'application/json',
          'x-service-key-id': creds.keyId,
          'x-service-data-set': DS,
        };
        const sig = signature[sigMode]();
        if (sig !== undefined) headers['x-service-signature'] = sig;
        if (headerMut.kind === 'drop') delete headers[headerMut.header];
        if (headerMut.kind === 'set') headers[headerMut.header] = headerMut.value;
        const res = await request(server.port, server.ca, { body, headers, http2 });
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        const accepted = checkResponse(res);
        const requestId = String(res.headers['x-request-id']);
        if (accepted > 0) acknowledged.set(requestId, accepted);
        else refused.add(requestId);
        assert.equal(server.child.exitCode, null, 'the server is alive');
      },
    ),
    { numRuns: RUNS, ...(process.env.ECAPI_FUZZ_SEED ? { seed: Number(process.env.ECAPI_FUZZ_SEED) } : {}) },
  );

  const perRequest = new Map<string, number>();
  for (const r of await exportQueue(dataDir)) perRequest.set(r.request_id, (perRequest.get(r.request_id) ?? 0) + 1);
  for (const [requestId, accepted] of acknowledged) assert.equal(perRequest.get(requestId), accepted, `request ${requestId}: queued = accepted`);
  for (const requestId of refused) assert.equal(perRequest.get(requestId), undefined, `refused request ${requestId} queued nothing`);
  for (const requestId of perRequest.keys()) assert.ok(acknowledged.has(requestId), `queued records belong to acknowledged requests`);
  assert.ok(!/uncaught|FATAL|unhandled/i.test(server.output()), 'no crash or unhandled error in the server output');
  // Every status class was exercised.
  for (const status of [200, 400, 401]) assert.ok((statuses.get(status) ?? 0) > 0, `some ${status}s (${JSON.stringify([...statuses])})`);
});
