/**
 * Black-box: with a body buffer far smaller than the requests in flight, every request still gets
 * its answer (waiting bodies are read as earlier ones answer; none is dropped or deadlocked), over
 * HTTP/1.1 with Content-Length, chunked HTTP/1.1 and HTTP/2, and all their events are queued.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { exportQueue, provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import { postSigned, sampleEvent } from '../helpers/https-client.js';

let server: ServerProcess;
let dataDir: string;
let creds: { keyId: string; secret: string };

before(async () => {
  dataDir = tempDataDir();
  creds = await provision(dataDir, ['budget']);
  // 0.1 MiB: each ~120 KB batch below is larger than the whole buffer, so they are read one at a time.
  server = await startServer({ dataDir, args: ['--workers', '1', '--no-worker', '--body-buffer', '0.1'] });
});
after(() => server.stop());

function batchBody(prefix: string): string {
  const events = Array.from({ length: 100 }, (_, i) => sampleEvent('budget', { id: `${prefix}-${i}`, properties: { note: 'n'.repeat(1000) } }));
  return JSON.stringify({ events });
}

test('a dozen large batches at once, over a body buffer smaller than one of them, are all answered and queued', async () => {
  const sends = Array.from({ length: 12 }, (_, i) => {
    const prefix = `b${i}`;
    const options = i % 3 === 1 ? { chunked: 16_384 } : i % 3 === 2 ? { http2: true } : {};
    return postSigned(server.port, server.ca, creds, 'budget', batchBody(prefix), options).then((res) => ({ prefix, res }));
  });
  const results = await Promise.all(sends);
  for (const { prefix, res } of results) assert.equal(res.status, 200, `${prefix}: ${res.text}`);
  const queued = new Set((await exportQueue(dataDir)).map((r) => r.event.id as string));
  for (const { prefix } of results) for (let i = 0; i < 100; i++) assert.ok(queued.has(`${prefix}-${i}`), `${prefix}-${i} queued`);
  const metrics = await (await fetch(`http://127.0.0.1:${server.adminPort}/metrics`)).text();
  assert.match(metrics, /^ecapi_request_body_bytes_in_flight 0$/m, 'every reservation was released');
  assert.match(metrics, /^ecapi_requests_waiting_for_body_budget 0$/m);
});
