/**
 * Black-box: the sender SDK retries what the spec says to retry, against the real server: a 500
 * from a queue that cannot commit (another process holds its write lock), a connection dropped
 * mid-request and a response lost after the server stored the events. At-least-once: an id may be
 * queued twice after a lost response, but every event is queued and every one is acknowledged.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { Client, type RetryInfo } from '@ecapi-ingest/client';
import { blockQueueCommits, exportQueue, provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';

let dataDir: string;
let server: ServerProcess;
let creds: { keyId: string; secret: string };

before(async () => {
  dataDir = tempDataDir();
  creds = await provision(dataDir, ['faults']);
  server = await startServer({ dataDir, args: ['--workers', '1'] });
});
after(async () => {
  await server.stop();
});

const events = (tag: string, n: number) =>
  Array.from({ length: n }, (_, i) => ({ id: `${tag}-${i}`, timestamp: Math.floor(Date.now() / 1000) - 5, event_type: 'page_view' as const, properties: { pad: 'y'.repeat(2000) } }));

async function assertAllQueued(ids: string[]): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const r of await exportQueue(dataDir)) counts.set(r.event.id, (counts.get(r.event.id) ?? 0) + 1);
  for (const id of ids) assert.ok((counts.get(id) ?? 0) >= 1, `${id} is queued`);
  return counts;
}

test('500 ingest backend unavailable is retried with backoff until the queue recovers', async () => {
  const unblock = await blockQueueCommits(dataDir);
  let locked = true;
  const release = () => {
    if (!locked) return;
    locked = false;
    void unblock();
  };
  const retries: RetryInfo[] = [];
  const c = new Client({
    baseUrl: `https://127.0.0.1:${server.port}`, keyId: creds.keyId, secret: creds.secret, dataSetId: 'faults', ca: server.ca,
    backoff: { baseMs: 100, maxMs: 400 },
    onRetry: (r) => {
      retries.push(r);
      release(); // the fault is gone once the first 500 came back
    },
  });
  try {
    const batch = events('e500', 20);
    const r = await c.send(batch);
    assert.deepEqual([r.accepted, r.rejected, r.undeliverable], [20, 0, 0]);
    assert.ok(retries.length >= 1);
    assert.equal(retries[0]!.reason, 'server-error');
    assert.equal(retries[0]!.status, 500);
    assert.deepEqual(retries[0]!.error, { code: 'SERVER_ERROR', message: '500 ingest backend unavailable', httpStatus: 500 });
    await assertAllQueued(batch.map((e) => e.id));
  } finally {
    release();
    await c.close();
  }
});

/** A TCP proxy in front of the server that breaks its first connection as `mode` says. */
async function faultyProxy(mode: 'mid-request' | 'lost-response'): Promise<{ port: number; broken: () => number; close: () => Promise<void> }> {
  let connections = 0;
  let broken = 0;
  const sockets = new Set<net.Socket>();
  const proxy = net.createServer((client) => {
    const first = connections++ === 0;
    const upstream = net.connect(server.port, '127.0.0.1');
    sockets.add(client).add(upstream);
    let fromClient = 0;
    const breakBoth = () => {
      broken++;
      client.destroy();
      upstream.destroy();
    };
    client.on('data', (chunk: Buffer) => {
      fromClient += chunk.length;
      if (first && mode === 'mid-request' && fromClient > 20_000) return breakBoth();
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      // The request body is ~40 KB: after it, the first bytes from the server are the response.
      if (first && mode === 'lost-response' && fromClient > 40_000) return breakBoth();
      client.write(chunk);
    });
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  return {
    port: (proxy.address() as net.AddressInfo).port,
    broken: () => broken,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => proxy.close(() => resolve()));
    },
  };
}

for (const mode of ['mid-request', 'lost-response'] as const) {
  test(`a connection broken ${mode === 'mid-request' ? 'mid-request' : 'after the server stored the events'} is retried; every event is queued and acknowledged`, async () => {
    const proxy = await faultyProxy(mode);
    const retries: RetryInfo[] = [];
    const c = new Client({
      baseUrl: `https://127.0.0.1:${proxy.port}`, keyId: creds.keyId, secret: creds.secret, dataSetId: 'faults', ca: server.ca,
      backoff: { baseMs: 50, maxMs: 200 }, concurrency: 1,
      onRetry: (r) => retries.push(r),
    });
    try {
      const batch = events(`drop-${mode}`, 20); // one request of ~40 KB
      const r = await c.send(batch);
      assert.equal(proxy.broken(), 1);
      assert.deepEqual([r.accepted, r.rejected, r.undeliverable], [20, 0, 0], JSON.stringify(r.results[0]));
      assert.ok(r.results.every((x) => x.status === 'accepted'));
      assert.equal(retries.length, 1);
      assert.equal(retries[0]!.reason, 'network-error');
      const counts = await assertAllQueued(batch.map((e) => e.id));
      // Mid-request the server never got the whole body: exactly once. A lost response means the
      // first copy was stored too: at least once, at most twice (merged by (data_set_id, id)).
      for (const e of batch) {
        const n = counts.get(e.id)!;
        if (mode === 'mid-request') assert.equal(n, 1);
        else assert.ok(n === 1 || n === 2);
      }
    } finally {
      await c.close();
      await proxy.close();
    }
  });
}
