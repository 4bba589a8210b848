/**
 * Failures a different URL or option would fix say so, in the SDK's terms, against real sockets:
 * a refused connection names the URL and baseUrl and is not retried (nothing listens there), a
 * self-signed certificate points at the `ca` option (not Node's --use-system-ca), a 404 says what
 * the base URL must look like. Local validation words an enum mismatch as the service does.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { Client, validateEvent, type RetryInfo } from '../src/index.js';
import { scripted, selfSigned } from './helpers/https-test-server.js';

const ev = (id: string) => ({ id, timestamp: 1746558464, event_type: 'page_view' as const });

/** A loopback port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

test('connection refused before any answer: a request-level failure naming the URL and baseUrl, not retried', async () => {
  const port = await closedPort();
  const retries: RetryInfo[] = [];
  const c = new Client({ baseUrl: `https://127.0.0.1:${port}`, keyId: 'k', secret: 's', dataSetId: 'ds', onRetry: (r) => retries.push(r) });
  try {
    const r = await c.send([ev('a'), ev('b')]);
    assert.deepEqual([r.undeliverable, r.requests, r.retries, retries.length], [2, 1, 0, 0]);
    assert.equal(r.failure?.code, 'CONNECTION_REFUSED');
    assert.equal(r.failure?.errorCode, 'ECONNREFUSED');
    assert.equal(r.failure?.message,
      `connection refused at https://127.0.0.1:${port} (ECONNREFUSED): nothing listens at https://127.0.0.1:${port}/v1/events (is the service running, on that port?): ` +
      "check baseUrl, the service's base URL, like https://ingest.example.com or https://127.0.0.1:8443, without /v1/events");
    assert.equal(r.failure?.detail, `connection refused at https://127.0.0.1:${port} (ECONNREFUSED)`);
  } finally {
    await c.close();
  }
});

test('connection refused after the service answered once is a restart: retried', async () => {
  const s = await scripted([{ status: 200, body: { accepted: 1 } }]);
  const c = s.client({ maxRetries: 2 });
  try {
    assert.equal((await c.send([ev('a')])).accepted, 1);
    await s.close();
    const r = await c.send([ev('b')]);
    assert.deepEqual([r.undeliverable, r.retries, r.failure], [1, 2, undefined]);
    const x = r.results[0]!;
    assert.ok(x.status === 'undeliverable' && x.error.code === 'NETWORK', JSON.stringify(x));
    assert.match(x.error.message, new RegExp(`ECONNREFUSED.*: POST https://127\\.0\\.0\\.1:${s.port}/v1/events$`));
  } finally {
    await c.close();
  }
});

test('a self-signed certificate points at the ca option, not at --use-system-ca', async () => {
  const s = await scripted([{ status: 200 }]);
  const c = s.client({ ca: undefined });
  try {
    const r = await c.send([ev('a')]);
    assert.equal(r.failure?.code, 'TLS');
    assert.equal(r.failure?.errorCode, 'DEPTH_ZERO_SELF_SIGNED_CERT');
    assert.doesNotMatch(r.failure!.message, /use-system-ca/);
    assert.match(r.failure!.message, new RegExp(`the server's certificate at https://127\\.0\\.0\\.1:${s.port}/v1/events is not trusted: pass the server's certificate \\(or its CA\\) in PEM as the Client's \`ca\` option`));
    assert.equal(s.seen.length, 0);
  } finally {
    await c.close();
    await s.close();
  }
});

test('WRONG_URL says what the base URL must look like', async () => {
  const s = await scripted([{ status: 404, body: { error: 'not found' } }]);
  const c = new Client({ baseUrl: `${s.baseUrl}/ingest`, ca: selfSigned().cert, keyId: 'k', secret: 's', dataSetId: 'ds' });
  try {
    const r = await c.send([ev('a')]);
    assert.equal(r.failure?.code, 'WRONG_URL');
    assert.equal(r.failure?.message,
      `404 not found: nothing answers POST ${s.baseUrl}/ingest/v1/events: baseUrl must be the service's base URL, like https://ingest.example.com or https://127.0.0.1:8443, without /v1/events`);
    assert.equal(r.failure?.detail, '404 not found');
  } finally {
    await c.close();
    await s.close();
  }
});

test('an enum mismatch names the value received, as the service does', () => {
  const base = { data_set_id: 'd', timestamp: 1746558464 };
  assert.equal(validateEvent({ ...base, event_type: 'purchse' })?.message, 'schema validation failed: event_type must be one of the ECAPI 1.0 event types, got "purchse"');
  assert.equal(validateEvent({ ...base, event_type: 'page_view', source: 'tv' })?.message,
    'schema validation failed: source must be one of "email", "website", "app", "phone_call", "chat", "physical_store", "system_generated", "business_messaging", "other", got "tv"');
});
