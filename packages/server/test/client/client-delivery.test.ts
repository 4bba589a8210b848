/**
 * Black-box: the sender SDK (@ecapi-ingest/client) against the real server process over TLS 1.3:
 * packing at the 1,000-event and 1 MiB boundaries, 207 and 400 handling, no retry on 400/401,
 * 429 honoring Retry-After, hashing with the published vectors.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, type Dispatcher } from 'undici';
import { Client, MAX_BODY_BYTES, batchBytes, type ClientOptions, type PlaintextEventInput, type RetryInfo } from '@ecapi-ingest/client';
import { cliJson, exportQueue, provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';

let dataDir: string;
let server: ServerProcess;
let creds: { keyId: string; secret: string };
let slow: { keyId: string; secret: string };
const NOW = () => Math.floor(Date.now() / 1000) - 5;

before(async () => {
  dataDir = tempDataDir();
  creds = await provision(dataDir, ['shop']);
  slow = await provision(dataDir, ['slow']);
  await cliJson(dataDir, ['data-set', 'limits', 'slow', '--rps', '2', '--burst-rps', '2', '--burst-seconds', '1']);
  server = await startServer({ dataDir, args: ['--workers', '1'] });
});
after(async () => {
  await server.stop();
});

function client(overrides: Partial<ClientOptions> = {}): Client {
  return new Client({ baseUrl: `https://127.0.0.1:${server.port}`, keyId: creds.keyId, secret: creds.secret, dataSetId: 'shop', ca: server.ca, ...overrides });
}

const event = (id: string, extra: Partial<PlaintextEventInput> = {}): PlaintextEventInput & { id: string } => ({ id, timestamp: NOW(), event_type: 'purchase', value: 5, currency_code: 'USD', ...extra }) as PlaintextEventInput & { id: string };

async function requestIdsOf(ids: string[]): Promise<Map<string, string[]>> {
  const wanted = new Set(ids);
  const byRequest = new Map<string, string[]>();
  for (const r of await exportQueue(dataDir)) {
    if (!wanted.has(r.event.id)) continue;
    byRequest.set(r.request_id, [...(byRequest.get(r.request_id) ?? []), r.event.id]);
  }
  return byRequest;
}

test('1,000 events go in one request, 1,001 in two; every event is queued once', async () => {
  const c = client();
  try {
    const thousand = Array.from({ length: 1000 }, (_, i) => event(`k-${i}`));
    const r1 = await c.send(thousand);
    assert.deepEqual([r1.accepted, r1.rejected, r1.undeliverable, r1.requests, r1.retries, r1.ok], [1000, 0, 0, 1, 0, true]);
    assert.equal((await requestIdsOf(thousand.map((e) => e.id))).size, 1);

    const more = Array.from({ length: 1001 }, (_, i) => event(`k1-${i}`));
    const r2 = await c.send(more);
    assert.deepEqual([r2.accepted, r2.requests], [1001, 2]);
    const groups = [...(await requestIdsOf(more.map((e) => e.id))).values()].map((g) => g.length).sort((a, b) => a - b);
    assert.deepEqual(groups, [1, 1000]);
    assert.ok(r2.results.every((r, i) => r.status === 'accepted' && r.index === i && r.id === `k1-${i}` && r.requestId));
  } finally {
    await c.close();
  }
});

test('a body of exactly 1,048,576 bytes is one request; one byte more makes two', async () => {
  const c = client();
  try {
    const build = (tag: string, extra: number) => {
      const events = [0, 1, 2].map((i) => event(`${tag}-${i}`, { properties: { pad: 'x'.repeat(300_000) } }));
      const sizes = events.map((e) => Buffer.byteLength(JSON.stringify({ data_set_id: 'shop', ...e })));
      const missing = MAX_BODY_BYTES - batchBytes(sizes);
      (events[2]!.properties as { pad: string }).pad += 'x'.repeat(missing + extra);
      return events;
    };
    const exact = build('mib', 0);
    const r1 = await c.send(exact);
    assert.deepEqual([r1.accepted, r1.requests], [3, 1], JSON.stringify(r1.results.filter((r) => r.status !== 'accepted')));
    const over = build('mib1', 1);
    const r2 = await c.send(over);
    assert.deepEqual([r2.accepted, r2.requests], [3, 2]);
    assert.deepEqual([...(await requestIdsOf(over.map((e) => e.id))).values()].map((g) => g.length).sort(), [1, 2]);
  } finally {
    await c.close();
  }
});

test('events without an id get a UUIDv7, which is what the queue holds', async () => {
  const c = client();
  try {
    const r = await c.send([{ timestamp: NOW(), event_type: 'page_view' }]);
    assert.equal(r.accepted, 1);
    const id = r.results[0]!.id!;
    assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-7/);
    assert.equal((await exportQueue(dataDir)).filter((q) => q.event.id === id).length, 1);
  } finally {
    await c.close();
  }
});

test('207: the rejected events come back with the service\'s errors and are not retried', async () => {
  const retries: RetryInfo[] = [];
  const c = client({ onRetry: (r) => retries.push(r) });
  try {
    const events = [event('p-0'), event('p-1', { currency_code: 'ABC' }), event('p-2')];
    const r = await c.send(events);
    assert.deepEqual([r.accepted, r.rejected, r.requests, r.retries], [2, 1, 1, 0]);
    assert.equal(retries.length, 0);
    const rejected = r.results[1]!;
    assert.equal(rejected.status, 'rejected');
    if (rejected.status !== 'rejected') return;
    assert.equal(rejected.httpStatus, 207);
    assert.equal(rejected.id, 'p-1');
    assert.equal(rejected.error.code, 'INVALID_FIELD');
    assert.match(rejected.error.message, /^invalid field currency_code/);
    assert.deepEqual((rejected.event as { currency_code: string }).currency_code, 'ABC');
    const queued = (await exportQueue(dataDir)).filter((q) => q.event.id?.startsWith('p-')).map((q) => q.event.id);
    assert.deepEqual(queued.sort(), ['p-0', 'p-2']);
  } finally {
    await c.close();
  }
});

test('400 (every event rejected) and 401 are never retried', async () => {
  const c = client();
  try {
    const r = await c.send([event('b-0', { currency_code: 'ABC' }), event('b-1', { currency_code: 'ABC' })]);
    assert.deepEqual([r.rejected, r.requests, r.retries], [2, 1, 0]);
    assert.ok(r.results.every((x) => x.status === 'rejected' && x.httpStatus === 400 && x.error.code === 'INVALID_FIELD' && /currency_code/.test(x.error.message)));
  } finally {
    await c.close();
  }
  // Wrong secret: one request-level failure, reported once; the other requests of the send are not
  // even made, and no event counts as rejected (they are undeliverable: resend after the fix).
  const wrong = client({ secret: 'sk_wrong', concurrency: 1, maxEventsPerRequest: 10 });
  try {
    const r = await wrong.send(Array.from({ length: 35 }, (_, i) => event(`u-${i}`)));
    assert.deepEqual([r.accepted, r.rejected, r.undeliverable, r.requests, r.retries], [0, 0, 35, 1, 0]);
    assert.equal(r.failure?.code, 'AUTHENTICATION');
    assert.equal(r.failure?.httpStatus, 401);
    assert.match(r.failure!.message, /^401 signature does not match/);
    assert.ok(r.results.every((x) => x.status === 'undeliverable' && x.error === r.failure), JSON.stringify(r.results[34]));
    assert.deepEqual([r.results[0]!.status === 'undeliverable' && r.results[0]!.attempts, r.results[34]!.status === 'undeliverable' && r.results[34]!.attempts], [1, 0]);
  } finally {
    await wrong.close();
  }
});

test('429: the client waits Retry-After before retrying, and every event is delivered', async () => {
  const dispatches: number[] = [];
  class Recording extends Agent {
    override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
      dispatches.push(Date.now());
      return super.dispatch(options, handler);
    }
  }
  const agent = new Recording({ connect: { ca: server.ca } });
  const retries: (RetryInfo & { at: number })[] = [];
  const c = client({ keyId: slow.keyId, secret: slow.secret, dataSetId: 'slow', dispatcher: agent, concurrency: 1, maxEventsPerRequest: 1, onRetry: (r) => retries.push({ ...r, at: Date.now() }) });
  try {
    const events = Array.from({ length: 6 }, (_, i) => event(`rl-${i}`));
    const r = await c.send(events);
    assert.deepEqual([r.accepted, r.undeliverable], [6, 0]);
    const limited = retries.filter((x) => x.reason === 'rate-limited');
    assert.ok(limited.length >= 1, 'the limit was hit');
    for (const x of limited) {
      assert.equal(x.status, 429);
      assert.ok(x.retryAfterMs !== undefined && x.retryAfterMs >= 1000, `Retry-After ${x.retryAfterMs}`);
      assert.ok(x.delayMs >= x.retryAfterMs!);
      const next = dispatches.find((t) => t > x.at);
      assert.ok(next !== undefined && next - x.at >= x.retryAfterMs! - 5, `next request ${next! - x.at} ms after the 429, Retry-After ${x.retryAfterMs} ms`);
    }
    const queued = new Set((await exportQueue(dataDir, 'production', ['--data-set', 'slow'])).map((q) => q.event.id));
    for (const e of events) assert.ok(queued.has(e.id));
  } finally {
    await c.close();
    await agent.close();
  }
});

test('hash: true sends the published normalization vectors', async () => {
  const c = client({ hash: { defaultRegion: 'US' } });
  try {
    const r = await c.send([event('h-0', {
      user_data: {
        email_address: [' User@example.com '],
        phone_numbers: ['+1 212-555-0000', '(212) 555-0000'],
        gender: ' Female ',
        customer_identifier: 'User123',
        address: [{ first_name: ' Jane ', city: ' New York ', country_code: 'US' }],
      },
    })]);
    assert.equal(r.accepted, 1, JSON.stringify(r.results));
    const queued = (await exportQueue(dataDir)).find((q) => q.event.id === 'h-0')!;
    assert.deepEqual(queued.event.user_data, {
      email_address: ['b4c9a289323b21a01c3e940f150eb9b8c542587f1abfd8f0e1cc1ffc5e475514'],
      phone_numbers: ['7c8d08bf90ca322bcac37f99ba14e980e4b1f5ba919f7e16a030af9070ba125e', '7c8d08bf90ca322bcac37f99ba14e980e4b1f5ba919f7e16a030af9070ba125e'],
      gender: '9f165139a8c2894a47aea23b77d330eca847264224a44d5a17b19db8b9a72c08',
      customer_identifier: 'e606e38b0d8c19b24cf0ee3808183162ea7cd63ff7912dbb22b5e803286b4446',
      address: [{ first_name: '81f8f6dde88365f3928796ec7aa53f72820b06db8664f5fe76a7eb13e24546a2', city: 'new york', country_code: 'us' }],
    });
  } finally {
    await c.close();
  }
});

test('an untrusted certificate is not retried: the events are undeliverable at once', async () => {
  const c = new Client({ baseUrl: `https://127.0.0.1:${server.port}`, keyId: creds.keyId, secret: creds.secret, dataSetId: 'shop', maxEventsPerRequest: 1, concurrency: 1 });
  try {
    const r = await c.send([event('tls-0'), event('tls-1')]);
    assert.deepEqual([r.undeliverable, r.requests, r.retries], [2, 1, 0]);
    assert.deepEqual([r.failure?.code, r.failure?.errorCode], ['TLS', 'DEPTH_ZERO_SELF_SIGNED_CERT']);
    assert.ok(r.results.every((x) => x.status === 'undeliverable' && x.error === r.failure), JSON.stringify(r.results[0]));
  } finally {
    await c.close();
  }
});
