/**
 * The public socket before TLS, black-box against the real `serve` process (issue 29 point 6,
 * issue 31 point 4):
 * - `--proxy-protocol <CIDRs>`: a PROXY v1 or v2 header from a trusted peer, written before a real
 *   TLS ClientHello (as HAProxy, nginx and Envoy do), makes the client it names the address that
 *   failed-authentication shedding counts, over HTTP/1.1 and HTTP/2; a header from a peer outside
 *   the CIDRs, or with no --proxy-protocol, closes the connection (a client cannot pick its address),
 *   as does a malformed one; each of those closes is counted on /metrics,
 *   ecapi_tls_handshake_failures_total{reason="proxy_header"}.
 * - plain HTTP on the HTTPS port gets a readable HTTP/1.1 400 saying to use https://, then close.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import tls from 'node:tls';
import http from 'node:http';
import https from 'node:https';
import { once } from 'node:events';
import { provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import { postSigned, sampleEvent, type Credentials } from '../helpers/https-client.js';
import { v1Header, v2Header } from '../helpers/proxy-headers.js';
import { postVia, postViaH2, signedHeaders, tlsAfter } from '../helpers/proxied-post.js';
import { metricsText, metricValue, waitFor } from '../helpers/fault-tools.js';

/** Writes `preface` and then tries a TLS handshake on the same connection: does it succeed? */
async function handshakeAfter(port: number, ca: string, preface: Buffer): Promise<boolean> {
  try {
    const socket = await tlsAfter(port, ca, preface, 'http/1.1');
    socket.destroy();
    return true;
  } catch {
    return false;
  }
}

const PROXY_HEADER_REFUSALS = 'ecapi_tls_handshake_failures_total{reason="proxy_header"}';

/** The PROXY headers `server` refused, on its /metrics. */
async function proxyHeaderRefusals(server: ServerProcess): Promise<number> {
  const value = metricValue(await metricsText(server.adminPort), PROXY_HEADER_REFUSALS);
  assert.ok(!Number.isNaN(value), `${PROXY_HEADER_REFUSALS} in /metrics`);
  return value;
}

async function proxyHeaderRefusalsBecome(server: ServerProcess, expected: number): Promise<void> {
  let last = Number.NaN;
  await waitFor(`${PROXY_HEADER_REFUSALS} = ${expected}`, async () => (last = await proxyHeaderRefusals(server)) === expected || undefined, 5000)
    .catch(() => assert.fail(`${PROXY_HEADER_REFUSALS}: expected ${expected}, got ${last}`));
}

describe('serve --proxy-protocol from a trusted balancer', () => {
  let server: ServerProcess;
  let creds: Credentials;
  const stranger: Credentials = { keyId: 'no-such-key', secret: 'x' };
  before(async () => {
    const dataDir = tempDataDir();
    creds = await provision(dataDir, ['pp']);
    // 3 failures and an address is shed; it then refills one failure per 100 s (never within the test).
    server = await startServer({
      dataDir,
      args: ['--workers', '1', '--failed-auth-burst', '3', '--failed-auth-rps', '0.01', '--proxy-protocol', '192.0.2.0/24, 127.0.0.0/8,::1'],
    });
  });
  after(() => server.stop());

  test('the client named by the header is the address shed, over v1 and v2, HTTP/1.1 and HTTP/2', async () => {
    // 203.0.113.7 fails authentication three times (unknown key id: 401 from the head).
    for (let i = 0; i < 3; i++) assert.equal(await postVia(server, v1Header('203.0.113.7', 40000 + i), stranger, 'pp'), 401);
    // 203.0.113.7 is now shed, whichever header version and HTTP version carries it (the key was never verified from there).
    assert.equal(await postVia(server, v1Header('203.0.113.7'), creds, 'pp'), 429);
    assert.equal(await postVia(server, v2Header('inet', '203.0.113.7', 40100), creds, 'pp'), 429);
    assert.equal(await postViaH2(server, v2Header('inet', '203.0.113.7', 40101), creds, 'pp'), 429);
    // Other clients behind the same balancer are not: each has its own address.
    assert.equal(await postVia(server, v1Header('198.51.100.9'), creds, 'pp'), 200);
    assert.equal(await postViaH2(server, v2Header('inet', '198.51.100.10', 40200), creds, 'pp'), 200);
    assert.equal(await postVia(server, v2Header('inet6', '2001:db8:0:0:0:0:0:9', 40300), creds, 'pp'), 200);
    // The balancer's own connections (no header, or v2 LOCAL as in health checks) keep the peer's address.
    assert.equal(await postVia(server, null, creds, 'pp'), 200);
    assert.equal(await postViaH2(server, v2Header('local'), creds, 'pp'), 200);
  });

  test('a header that arrives in pieces (one byte per TCP segment) is read whole, and the TLS bytes after it intact', async () => {
    const header = v2Header('inet', '203.0.113.7', 40500, Buffer.from([0x04, 0x00, 0x02, 0x61, 0x62])); // with a 5-byte TLV
    const raw = net.connect(server.port, '127.0.0.1');
    raw.setNoDelay(true);
    await once(raw, 'connect');
    for (const byte of header) {
      raw.write(Buffer.from([byte]));
      await new Promise((r) => setTimeout(r, 2));
    }
    const socket = tls.connect({ socket: raw, servername: 'localhost', ca: server.ca, minVersion: 'TLSv1.3', ALPNProtocols: ['http/1.1'] });
    await once(socket, 'secureConnect');
    // 203.0.113.7 was shed by the test before: the split header named it.
    const body = JSON.stringify(sampleEvent('pp'));
    const status = await new Promise<number>((resolve, reject) => {
      const req = https.request(
        { createConnection: () => socket, method: 'POST', path: '/v1/events', host: 'localhost', headers: { ...signedHeaders(creds, 'pp', body), 'content-length': Buffer.byteLength(body) } },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
    socket.destroy();
    assert.equal(status, 429);
  });

  test('a malformed header from a trusted peer closes the connection; counted as a proxy_header handshake failure', async () => {
    const before = await proxyHeaderRefusals(server);
    assert.equal(await handshakeAfter(server.port, server.ca, Buffer.from('PROXY TCP4 203.0.113.999 127.0.0.1 1 2\r\n')), false);
    const badVersion = v2Header('inet', '203.0.113.7', 1);
    badVersion[12] = 0x31;
    assert.equal(await handshakeAfter(server.port, server.ca, badVersion), false);
    // While a well-formed one is followed by a working handshake (and is not counted).
    assert.equal(await handshakeAfter(server.port, server.ca, v1Header('198.51.100.11')), true);
    await proxyHeaderRefusalsBecome(server, before + 2);
  });
});

describe('PROXY headers from peers that are not trusted', () => {
  let untrusting: ServerProcess;
  let plain: ServerProcess;
  let creds: Credentials;
  before(async () => {
    const dataDir = tempDataDir();
    creds = await provision(dataDir, ['pp']);
    // Trusts a balancer network the test's loopback connections are not in.
    untrusting = await startServer({ dataDir, args: ['--workers', '1', '--proxy-protocol', '192.0.2.0/24'] });
    plain = await startServer({ dataDir: tempDataDir(), args: ['--workers', '1'] });
  });
  after(async () => {
    await untrusting.stop();
    await plain.stop();
  });

  test('a header from outside the CIDRs, or with no --proxy-protocol, closes the connection; direct TLS still works', async () => {
    for (const server of [untrusting, plain]) {
      const before = await proxyHeaderRefusals(server);
      assert.equal(await handshakeAfter(server.port, server.ca, v1Header('203.0.113.7')), false, 'v1 refused');
      assert.equal(await handshakeAfter(server.port, server.ca, v2Header('inet', '203.0.113.7', 1)), false, 'v2 refused');
      await proxyHeaderRefusalsBecome(server, before + 2);
    }
    assert.equal(await postVia(untrusting, null, creds, 'pp'), 200);
    assert.equal((await postSigned(untrusting.port, untrusting.ca, creds, 'pp', JSON.stringify(sampleEvent('pp')))).status, 200);
  });

  test('serve refuses a bad --proxy-protocol entry with one clear line', async () => {
    await assert.rejects(
      startServer({ dataDir: tempDataDir(), args: ['--proxy-protocol', '10.0.0.0/33'] }),
      /invalid --proxy-protocol entry "10\.0\.0\.0\/33"/,
    );
  });
});

describe('plain HTTP on the HTTPS port', () => {
  let server: ServerProcess;
  before(async () => {
    server = await startServer({ dataDir: tempDataDir(), args: ['--workers', '1', '--proxy-protocol', '127.0.0.1'] });
  });
  after(() => server.stop());

  /** A real plain-HTTP request (node:http, as `curl http://…` sends one); resolves status, body and whether the server closed. */
  function plainRequest(method: string, body?: string, preface?: Buffer): Promise<{ status: number; body: string; connection: string | undefined }> {
    return new Promise((resolve, reject) => {
      const req = http.request(
        {
          host: '127.0.0.1', port: server.port, method, path: '/v1/events', agent: false,
          ...(preface ? { createConnection: () => { const s = net.connect(server.port, '127.0.0.1'); s.write(preface); return s; } } : {}),
          headers: body ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } : {},
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8').on('data', (c: string) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, connection: res.headers.connection }));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  test('GET and POST get a readable 400 that says to use https://, and the connection closes', async () => {
    for (const [method, body] of [['GET', undefined], ['POST', JSON.stringify({ events: [sampleEvent('x')] }).repeat(20)]] as const) {
      const res = await plainRequest(method, body);
      assert.equal(res.status, 400, method);
      assert.equal(res.connection, 'close');
      assert.deepEqual(JSON.parse(res.body), {
        error: 'plain HTTP request sent to the HTTPS port: this port speaks HTTPS only (TLS 1.3); use https:// in the URL',
      });
    }
  });

  test('also behind a trusted PROXY header', async () => {
    const res = await plainRequest('GET', undefined, v1Header('203.0.113.7'));
    assert.equal(res.status, 400);
    assert.match(res.body, /use https:\/\//);
  });

  test('TLS on the same port is unaffected', async () => {
    const creds = { keyId: 'unknown', secret: 'x' };
    assert.equal((await postSigned(server.port, server.ca, creds, 'x', '{}')).status, 401);
  });
});
