/**
 * The cap on established connections of the public TLS server (http/public-tls-server.ts,
 * `maxConnections`): past it the oldest connection on which nothing authenticated is dropped to make
 * room, trusted connections never are, and when every connection is trusted the new one is refused.
 * In-process (the cap is a constructor option), with real TLS 1.3 connections over loopback; the
 * handler trusts a connection the way public-server.ts does after an HMAC passed. Each close the cap
 * makes is told to the server's onDefenceClose hook (what public-server.ts counts on /metrics).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import tls from 'node:tls';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { loadTlsMaterial } from '../../src/tls/tls-material.js';
import { connectionOf, createPublicTlsServer, type PublicTlsServer } from '../../src/http/public-tls-server.js';
import { tempDataDir } from '../helpers/server-process.js';
import { waitFor } from '../helpers/fault-tools.js';

let front: PublicTlsServer;
let port: number;
let ca: string;
/** What the server told its onDefenceClose hook. */
const closes: string[] = [];

before(async () => {
  const material = await loadTlsMaterial({ dataDir: tempDataDir() });
  ca = material.cert;
  front = createPublicTlsServer({ cert: material.cert, key: material.key, maxConnections: 2 }, { onDefenceClose: (reason) => closes.push(reason) });
  // "Authenticated": a request with x-trust (public-server.ts calls trust() when an HMAC passed).
  front.server.on('request', (req, res) => {
    const connection = connectionOf(req);
    if (req.headers['x-trust'] === 'yes' && connection !== undefined) front.trust(connection);
    res.writeHead(200, { 'content-length': 2 }).end('ok');
  });
  front.server.listen(0, '127.0.0.1');
  await once(front.server, 'listening');
  port = (front.server.address() as AddressInfo).port;
});
after(async () => {
  for (const socket of front.sockets) socket.destroy();
  await new Promise<void>((resolve) => front.server.close(() => resolve()));
});

interface Client {
  readonly socket: tls.TLSSocket;
  closed(): boolean;
  /** One keep-alive GET; resolves once its answer is in. */
  get(trust: boolean): Promise<void>;
}

async function connect(): Promise<Client> {
  const socket = tls.connect({ host: '127.0.0.1', port, servername: 'localhost', ca, minVersion: 'TLSv1.3', ALPNProtocols: ['http/1.1'] });
  let closed = false;
  let received = '';
  socket.on('error', () => {});
  socket.on('data', (d: Buffer) => (received += d.toString('latin1')));
  socket.on('close', () => (closed = true));
  await once(socket, 'secureConnect');
  return {
    socket,
    closed: () => closed,
    get: async (trust) => {
      const before = received.split('HTTP/1.1 200').length;
      socket.write(`GET / HTTP/1.1\r\nHost: localhost\r\n${trust ? 'x-trust: yes\r\n' : ''}\r\n`);
      await waitFor('the answer', () => (received.split('HTTP/1.1 200').length > before ? true : undefined), 5000, 10);
    },
  };
}

/** Waits until the server has registered `n` established connections (its 'secureConnection' ran). */
const established = (n: number) => waitFor(`${n} connections`, () => (front.sockets.size === n ? true : undefined), 5000, 10);

test('past the cap the oldest untrusted connection makes room; trusted ones stay; all trusted: the new one is refused', async () => {
  const a = await connect();
  await a.get(true); // trusted
  const b = await connect(); // untrusted
  await b.get(false);
  await established(2);
  assert.equal(front.untrustedConnections(), 1);

  const c = await connect(); // over the cap: b, the oldest untrusted, is dropped
  await waitFor('b to be dropped', () => (b.closed() ? true : undefined), 5000, 10);
  assert.equal(a.closed(), false, 'the trusted connection stays');
  assert.deepEqual(closes, ['connection_cap']);
  await c.get(false);
  assert.equal(front.sockets.size, 2);

  await c.get(true); // now every connection is trusted
  assert.equal(front.untrustedConnections(), 0);
  const d = await connect().catch(() => null);
  if (d !== null) await waitFor('the new connection to be refused', () => (d.closed() ? true : undefined), 5000, 10);
  await waitFor('the refusal to be told', () => (closes.length === 2 ? true : undefined), 5000, 10);
  assert.deepEqual(closes, ['connection_cap', 'connection_cap']);
  assert.equal(a.closed(), false);
  assert.equal(c.closed(), false);
  await a.get(false);
  await c.get(false);
  assert.equal(front.sockets.size, 2);
  a.socket.destroy();
  c.socket.destroy();
});
