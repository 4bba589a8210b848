/**
 * Black-box: the SDK's track() against the real server over TLS 1.3 (every tracked event queued
 * once, in batches), and its local validation against the service's own answers (the same message
 * for the same mistake, so a sender reads one sentence whether the event was refused locally or
 * by the service).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Client, validateEvent, type ClientOptions, type SendResult } from '@ecapi-ingest/client';
import { exportQueue, provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';

let dataDir: string;
let server: ServerProcess;
let creds: { keyId: string; secret: string };
const NOW = () => Math.floor(Date.now() / 1000) - 5;

before(async () => {
  dataDir = tempDataDir();
  creds = await provision(dataDir, ['track']);
  server = await startServer({ dataDir, args: ['--workers', '1'] });
});
after(async () => {
  await server.stop();
});

function client(overrides: Partial<ClientOptions> = {}): Client {
  return new Client({ baseUrl: `https://127.0.0.1:${server.port}`, keyId: creds.keyId, secret: creds.secret, dataSetId: 'track', ca: server.ca, ...overrides });
}

test('tracked events reach the queue once each, in batches of flushAt, the last one on close()', async () => {
  const batches: SendResult[] = [];
  const c = client({ hash: true, flushAt: 40, flushIntervalMs: 3_600_000, onBatch: (r) => batches.push(r) });
  const ids: string[] = [];
  for (let i = 0; i < 100; i++) {
    const r = c.track({ timestamp: NOW(), event_type: 'purchase', value: i, currency_code: 'USD', user_data: { email_address: [`user${i}@example.com`] } });
    assert.equal(r.status, 'queued');
    ids.push(r.id!);
  }
  await c.close();
  assert.deepEqual(batches.map((b) => [b.total, b.accepted]), [[40, 40], [40, 40], [20, 20]]);
  assert.deepEqual(c.stats(), { tracked: 100, queued: 0, queuedBytes: 0, accepted: 100, rejected: 0, undeliverable: 0, dropped: 0, batches: 3 });
  const queued = (await exportQueue(dataDir, 'production', ['--data-set', 'track'])).filter((r) => ids.includes(r.event.id));
  assert.deepEqual(queued.map((r) => r.event.id), ids, 'each once, in tracking order');
  assert.equal(new Set(queued.map((r) => r.request_id)).size, 3);
});

test('local validation words a mistake exactly as the service does', async () => {
  const base = { id: 'x', data_set_id: 'track', timestamp: NOW() };
  const mistakes: Record<string, unknown>[] = [
    { ...base, id: 'm1', event_type: 'purchse' },
    { ...base, id: 'm2', event_type: 'page_view', source: 'tv' },
    { ...base, id: 'm3', event_type: 'purchase', value: 1 },
    { ...base, id: 'm4', event_type: 'page_view', user_data: { email_address: ['plain@example.com'] } },
    { ...base, id: 'm5', event_type: 'page_view', colour: 'red' },
  ];
  const c = client({ validate: false });
  try {
    const r = await c.send(mistakes as never);
    assert.equal(r.rejected, mistakes.length, JSON.stringify(r.results));
    for (const [i, event] of mistakes.entries()) {
      const service = r.results[i]!;
      assert.ok(service.status === 'rejected' && service.httpStatus === 400);
      assert.deepEqual(validateEvent(event), service.error, `event ${event.id}`);
    }
  } finally {
    await c.close();
  }
});
