/**
 * Heap held by track() while the service never answers: N events (default 40,000, about 358 bytes
 * each serialized) tracked against a loopback HTTPS server that accepts connections and never
 * replies, then the heap growth per byte the queue counts (stats().queuedBytes).
 *
 *   node --expose-gc packages/client/dist/scripts/track-memory.js [N]
 *
 * Not a test (no timing, no assertion): the figure behind "about 1.5 times the bytes counted" in
 * batcher.ts and the SDK guide.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '../src/index.js';

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');
const n = Number(process.argv[2] ?? 40_000);
const dir = mkdtempSync(join(tmpdir(), 'ecapi-track-memory-'));
execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1',
  '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { stdio: 'ignore' });
const cert = readFileSync(join(dir, 'cert.pem'), 'utf8');
const server = https.createServer({ cert, key: readFileSync(join(dir, 'key.pem')) }, () => {
  // never answers: every batch stays in flight, every event stays held
});
rmSync(dir, { recursive: true, force: true });
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const port = (server.address() as AddressInfo).port;
const client = new Client({ baseUrl: `https://127.0.0.1:${port}`, ca: cert, keyId: 'k', secret: 's', dataSetId: 'ds', flushIntervalMs: 3_600_000, timeoutMs: 600_000, maxQueuedEvents: n + 1, maxQueuedBytes: 1 << 30 });
client.track({ timestamp: 1746558464, event_type: 'page_view' }); // warm-up: Ajv compiled, connection pool made
await new Promise((resolve) => setTimeout(resolve, 300));
gc();
const before = process.memoryUsage().heapUsed;
const bytesBefore = client.stats().queuedBytes;
for (let i = 0; i < n; i++) {
  client.track({ timestamp: 1746558464, event_type: 'purchase', value: i, currency_code: 'USD',
    properties: { page_url: `https://shop.example.com/product/${i}?ref=campaign-${i % 100}`, transaction_id: `tx-${i}-${'x'.repeat(100)}` } });
}
await new Promise((resolve) => setTimeout(resolve, 500));
gc();
const grown = process.memoryUsage().heapUsed - before;
const stats = client.stats();
const counted = stats.queuedBytes - bytesBefore;
console.log(JSON.stringify({ events: n, queued: stats.queued, queued_bytes: counted, heap_growth_bytes: grown, heap_per_counted_byte: Number((grown / counted).toFixed(2)) }));
process.exit(0);
