/**
 * Pre-auth shedding on the public port counts an IPv6 client by its /64, black-box against the real
 * `serve` process over real TLS 1.3 (audit finding: keyed per /128, a client rotating its source
 * address within its /64 got a fresh burst of failures with each, i.e. unthrottled signature
 * guessing). Loopback has a single IPv6 address, so the client addresses come from PROXY v2 headers
 * of a trusted balancer (`--proxy-protocol`), as on a real deployment behind HAProxy.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import tls from 'node:tls';
import https from 'node:https';
import http2 from 'node:http2';
import { once } from 'node:events';
import { signBody } from '@ecapi-ingest/protocol';
import { provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import { sampleEvent, type Credentials } from '../helpers/https-client.js';
import { v2Header } from '../helpers/proxy-headers.js';

let server: ServerProcess;
let creds: Credentials;
const DS = 'v6';

before(async () => {
  const dataDir = tempDataDir();
  creds = await provision(dataDir, [DS]);
  // 3 failures and a client is shed; it then refills one failure per 100 s (never within the test).
  server = await startServer({
    dataDir,
    args: ['--workers', '1', '--no-worker', '--failed-auth-burst', '3', '--failed-auth-rps', '0.01', '--proxy-protocol', '127.0.0.0/8'],
  });
});
after(async () => {
  assert.equal(await server.stop(), 0);
});

async function tlsAs(client: string, port: number, alpn: string): Promise<tls.TLSSocket> {
  const raw = net.connect(server.port, '127.0.0.1');
  await once(raw, 'connect');
  raw.write(v2Header('inet6', client, port));
  const socket = tls.connect({ socket: raw, servername: 'localhost', ca: server.ca, minVersion: 'TLSv1.3', ALPNProtocols: [alpn] });
  await once(socket, 'secureConnect');
  return socket;
}

function headers(keyId: string, secret: string, body: string): Record<string, string> {
  return {
    'content-type': 'application/json', accept: 'application/json',
    'x-service-key-id': keyId, 'x-service-data-set': DS, 'x-service-signature': signBody(body, secret),
  };
}

/** One POST over HTTP/1.1 from `client` (a PROXY v2 header names it); resolves the status. */
async function postAs(client: string, port: number, keyId: string, secret: string): Promise<number> {
  const socket = await tlsAs(client, port, 'http/1.1');
  const body = JSON.stringify(sampleEvent(DS));
  return new Promise((resolve, reject) => {
    const req = https.request(
      { createConnection: () => socket, method: 'POST', path: '/v1/events', host: 'localhost', headers: { ...headers(keyId, secret, body), 'content-length': Buffer.byteLength(body) } },
      (res) => {
        res.resume();
        res.on('end', () => {
          socket.destroy();
          resolve(res.statusCode ?? 0);
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** The same over HTTP/2. */
async function postAsH2(client: string, port: number, keyId: string, secret: string): Promise<number> {
  const socket = await tlsAs(client, port, 'h2');
  const session = http2.connect(`https://localhost:${server.port}`, { createConnection: () => socket });
  session.on('error', () => {});
  const body = JSON.stringify(sampleEvent(DS));
  try {
    const stream = session.request({ ':method': 'POST', ':path': '/v1/events', ...headers(keyId, secret, body) });
    stream.end(body);
    const [h] = (await once(stream, 'response')) as [http2.IncomingHttpHeaders];
    stream.resume();
    return Number(h[':status']);
  } finally {
    session.close();
  }
}

test('IPv6 clients rotating their source address within one /64 share one failed-authentication bucket', async () => {
  // A known key id, a wrong secret: 401 after the body (an HMAC computed per guess), from three
  // different addresses of 2001:db8:1:2::/64.
  for (let i = 1; i <= 3; i++) assert.equal(await postAs(`2001:db8:1:2::${i}`, 41000 + i, creds.keyId, 'guessed-secret'), 401, `guess ${i}`);
  // Any further address of that /64 is shed from the head, before a body or an HMAC, over both HTTP versions.
  assert.equal(await postAs('2001:db8:1:2::4', 41004, creds.keyId, 'guessed-secret'), 429);
  assert.equal(await postAs('2001:db8:1:2:ffff:eeee:dddd:cccc', 41005, creds.keyId, creds.secret), 429);
  assert.equal(await postAsH2('2001:db8:1:2::5', 41006, creds.keyId, creds.secret), 429);
  // Another /64 (next door) is not: it has a bucket of its own.
  assert.equal(await postAs('2001:db8:1:3::1', 41007, creds.keyId, creds.secret), 200);
  assert.equal(await postAsH2('2001:db8:1:3::2', 41008, creds.keyId, creds.secret), 200);
});
