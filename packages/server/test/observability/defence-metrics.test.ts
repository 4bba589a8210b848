/**
 * Black-box, against the real `serve --workers 2` over real TLS: what the public port's defences and
 * Node's own layers end before (or instead of) an answer shows on the primary's /metrics, which sums
 * its two workers' figures (each connection lands on one worker or the other; a count read from one
 * worker alone would come up short):
 * - ecapi_tls_handshake_failures_total{reason}: a silent socket and a half-sent ClientHello past
 *   --handshake-timeout (timeout), a TLS 1.2 client (protocol), a client refusing the certificate
 *   with an alert (certificate, `openssl s_client`), a client leaving mid-handshake (reset), a
 *   plain-HTTP request (plain_http), a PROXY header without --proxy-protocol (proxy_header);
 * - ecapi_public_timeouts_total{timeout}: an HTTP/1.1 head trickling past --headers-timeout
 *   (headers), a trusted HTTP/1.1 and HTTP/2 body trickling past --request-timeout (request), a body
 *   that stalls (body_idle), an untrusted body crawling below --min-body-rate (body_rate), trusted
 *   HTTP/1.1 and HTTP/2 connections left idle past --keep-alive-timeout (idle);
 * - ecapi_protocol_errors_total{protocol}: a malformed HTTP/1.1 request line (http1), an HTTP/2
 *   frame nghttp2 refuses (http2).
 * Each case asserts the exact move of every label of these families and of
 * ecapi_untrusted_connections_closed_total: its own label up by one, every other unchanged (one
 * close, one count). The timeouts are short (2 s to 5 s); each case waits for the counter with the
 * polling helper rather than for a time. Last, in-process, the closed mapping from the TLS layer's
 * error codes to reasons, with the spellings of the OpenSSL versions Node ships.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import tls from 'node:tls';
import http2 from 'node:http2';
import { execFile } from 'node:child_process';
import { signBody } from '@ecapi-ingest/protocol';
import { provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import { sampleEvent, type Credentials } from '../helpers/https-client.js';
import { openRaw, parseResponses, signedHead, sleep, type RawExchange } from '../helpers/raw-tls.js';
import { metricsText, waitFor } from '../helpers/fault-tools.js';
import { toolSkip } from '../helpers/external-tool.js';
import { handshakeFailureReasonOf } from '../../src/http/public-tls-server.js';

const DS = 'defences';
let server: ServerProcess;
let creds: Credentials;

before(async () => {
  const dataDir = tempDataDir();
  creds = await provision(dataDir, [DS]);
  server = await startServer({
    dataDir,
    args: [
      '--workers', '2', '--no-worker', '--failed-auth-burst', '100000',
      '--handshake-timeout', '2s', '--headers-timeout', '2s', '--request-timeout', '5s', '--body-idle-timeout', '2s', '--keep-alive-timeout', '4s',
    ],
  });
});
after(async () => {
  assert.equal(await server.stop(), 0);
});

/** The families under test; every sample of each is compared. */
const FAMILIES = ['ecapi_tls_handshake_failures_total', 'ecapi_public_timeouts_total', 'ecapi_protocol_errors_total', 'ecapi_untrusted_connections_closed_total'];

/** Every sample of FAMILIES, by its exposition key (`name{label="value"}`). */
async function defenceCounts(): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const line of (await metricsText(server.adminPort)).split('\n')) {
    const match = /^([a-z_]+)(\{[^}]*\})? (\S+)$/.exec(line);
    if (match && FAMILIES.includes(match[1]!)) counts.set(`${match[1]}${match[2] ?? ''}`, Number(match[3]));
  }
  return counts;
}

/** Waits until every sample equals `before` plus `moves` (absent: unchanged), and stays so once `settled` resolves. */
async function expectMoves(before: Map<string, number>, moves: Record<string, number>, settled: Promise<unknown> = Promise.resolve()): Promise<void> {
  for (const key of Object.keys(moves)) assert.ok(before.has(key), `${key} is exported before it moves`);
  const expected = new Map([...before].map(([key, value]) => [key, value + (moves[key] ?? 0)]));
  const differences = (now: Map<string, number>) =>
    [...expected].filter(([key, value]) => now.get(key) !== value).map(([key, value]) => `${key}: expected ${value}, got ${now.get(key)}`);
  let last: string[] = [];
  await waitFor('the counters to move', async () => (last = differences(await defenceCounts())).length === 0 || undefined, 15_000)
    .catch(() => assert.fail(`/metrics:\n${last.join('\n')}`));
  await settled;
  await sleep(300);
  assert.deepEqual(differences(await defenceCounts()), [], 'nothing else counted after the close');
}

const handshake = (reason: string) => `ecapi_tls_handshake_failures_total{reason="${reason}"}`;
const timeout = (kind: string) => `ecapi_public_timeouts_total{timeout="${kind}"}`;
const protocolError = (protocol: string) => `ecapi_protocol_errors_total{protocol="${protocol}"}`;

/** A TCP connection that writes `bytes` (maybe none); `closed` resolves when the server closed it. */
async function tcp(bytes?: string | Buffer): Promise<{ socket: net.Socket; closed: Promise<void>; received: () => string }> {
  const socket = net.connect(server.port, '127.0.0.1');
  const chunks: Buffer[] = [];
  socket.on('error', () => {});
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  if (bytes !== undefined) socket.write(bytes);
  return { socket, closed, received: () => Buffer.concat(chunks).toString('latin1') };
}

/** The start of a TLS ClientHello: a handshake record header promising 512 bytes, and 40 of them. */
function halfClientHello(): Buffer {
  return Buffer.concat([Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]), Buffer.alloc(34, 0x2a)]);
}

/** An HTTP/1.1 connection on which a signed request passed (trusted from then on). */
async function trustedRaw(): Promise<RawExchange> {
  const raw = await openRaw(server.port, server.ca);
  const body = JSON.stringify(sampleEvent(DS));
  await raw.write(signedHead(body, creds, DS, [`Content-Length: ${Buffer.byteLength(body)}`]) + body);
  await waitFor('the signed answer', async () => (parseResponses(raw.received()).length === 1 ? true : undefined), 5000);
  assert.equal(parseResponses(raw.received())[0]!.status, 200);
  return raw;
}

/** An HTTP/2 session on which a signed request passed. */
async function trustedSession(): Promise<http2.ClientHttp2Session> {
  const session = http2.connect(`https://localhost:${server.port}`, { ca: server.ca, minVersion: 'TLSv1.3' });
  session.on('error', () => {});
  const body = JSON.stringify(sampleEvent(DS));
  const stream = session.request({
    ':method': 'POST', ':path': '/v1/events', 'content-type': 'application/json',
    'x-service-key-id': creds.keyId, 'x-service-data-set': DS, 'x-service-signature': signBody(body, creds.secret),
  });
  const status = new Promise<number>((resolve, reject) => {
    stream.once('response', (headers) => resolve(Number(headers[':status'])));
    stream.once('error', reject);
  });
  stream.resume();
  stream.end(body);
  assert.equal(await status, 200);
  return session;
}

/** Writes `text` one byte per `everyMs` until the connection closes or it is all sent. */
async function trickle(raw: RawExchange, text: string, everyMs: number): Promise<number> {
  let sent = 0;
  while (!raw.isClosed() && sent < text.length) {
    await raw.write(text[sent++]!);
    await sleep(everyMs);
  }
  return sent;
}

describe('ecapi_tls_handshake_failures_total', () => {
  test('timeout: a socket that sends nothing, and a half-sent ClientHello, past --handshake-timeout', async () => {
    const before = await defenceCounts();
    const silent = await tcp();
    const half = await tcp(halfClientHello());
    await expectMoves(before, { [handshake('timeout')]: 2 }, Promise.all([silent.closed, half.closed]));
  });

  test('protocol: TLS 1.2 clients, counted by both workers and summed by the primary', async () => {
    const before = await defenceCounts();
    // node:cluster hands connections to the workers in turn: four land two on each.
    for (let i = 0; i < 4; i++) {
      const socket = tls.connect({ host: '127.0.0.1', port: server.port, servername: 'localhost', ca: server.ca, maxVersion: 'TLSv1.2' });
      const failed = new Promise<string | undefined>((resolve) => {
        socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code));
        socket.once('secureConnect', () => resolve('connected'));
      });
      assert.equal(await failed, 'ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION');
      socket.destroy();
    }
    await expectMoves(before, { [handshake('protocol')]: 4 });
  });

  test('certificate: a client that does not trust the certificate says so with an alert', { skip: toolSkip('openssl', 'openssl') }, async () => {
    const before = await defenceCounts();
    // No trusted CA at all: the self-signed certificate fails verification, s_client sends its alert and exits 1.
    const status = await new Promise<number | null>((resolve) => {
      const child = execFile('openssl', ['s_client', '-connect', `127.0.0.1:${server.port}`, '-servername', 'localhost', '-verify_return_error', '-no-CAfile', '-no-CApath', '-no-CAstore'], { timeout: 10_000 },
        (error) => resolve(error ? (typeof error.code === 'number' ? error.code : null) : 0));
      child.stdin!.end();
    });
    assert.equal(status, 1, 'openssl s_client refused the certificate');
    await expectMoves(before, { [handshake('certificate')]: 1 });
  });

  test('reset: a client that leaves mid-handshake', async () => {
    const before = await defenceCounts();
    const half = await tcp(halfClientHello());
    await sleep(200);
    half.socket.end();
    await expectMoves(before, { [handshake('reset')]: 1 }, half.closed);
  });

  test('plain_http: a plain-HTTP request gets its 400, and is counted', async () => {
    const before = await defenceCounts();
    const plain = await tcp('GET /v1/events HTTP/1.1\r\nHost: localhost\r\n\r\n');
    await plain.closed;
    assert.match(plain.received(), /^HTTP\/1\.1 400 Bad Request\r\n/);
    await expectMoves(before, { [handshake('plain_http')]: 1 });
  });

  test('proxy_header: a PROXY header without --proxy-protocol closes the connection', async () => {
    const before = await defenceCounts();
    const proxied = await tcp('PROXY TCP4 203.0.113.7 127.0.0.1 40000 443\r\n');
    await proxied.closed;
    await expectMoves(before, { [handshake('proxy_header')]: 1 });
  });
});

describe('ecapi_public_timeouts_total', () => {
  test('headers: an HTTP/1.1 head trickling past --headers-timeout (408)', { timeout: 20_000 }, async () => {
    const before = await defenceCounts();
    const raw = await openRaw(server.port, server.ca);
    const body = JSON.stringify(sampleEvent(DS));
    const sent = await trickle(raw, signedHead(body, creds, DS, [`Content-Length: ${Buffer.byteLength(body)}`]), 500);
    assert.ok(sent < 20, `the trickle was cut off (${sent} bytes sent)`);
    assert.match(raw.received(), /^$|^HTTP\/1\.1 408 Request Timeout\r\n/);
    await expectMoves(before, { [timeout('headers')]: 1 }, raw.closed);
  });

  test('request: a trusted HTTP/1.1 body trickling past --request-timeout (408)', { timeout: 20_000 }, async () => {
    const raw = await trustedRaw();
    const before = await defenceCounts();
    const body = JSON.stringify(sampleEvent(DS));
    // Trusted: no minimum rate; a byte every 300 ms: never idle. Only the request timeout ends it.
    await raw.write(signedHead(body, creds, DS, [`Content-Length: ${Buffer.byteLength(body)}`]));
    const sent = await trickle(raw, body, 300);
    assert.ok(sent < body.length, 'the trickle was cut off');
    await expectMoves(before, { [timeout('request')]: 1 }, raw.closed);
  });

  test('request: a trusted HTTP/2 stream trickling past --request-timeout (cancelled)', { timeout: 20_000 }, async () => {
    const session = await trustedSession();
    try {
      const before = await defenceCounts();
      const body = JSON.stringify(sampleEvent(DS));
      const stream = session.request({
        ':method': 'POST', ':path': '/v1/events', 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)),
        'x-service-key-id': creds.keyId, 'x-service-data-set': DS, 'x-service-signature': signBody(body, creds.secret),
      });
      stream.on('error', () => {});
      const closed = new Promise<void>((resolve) => stream.once('close', () => resolve()));
      let sent = 0;
      while (!stream.destroyed && sent < body.length) {
        stream.write(body[sent++]!);
        await sleep(300);
      }
      await closed;
      assert.ok(sent < body.length, 'the trickle was cut off');
      // Closed by the client now, not left to reach the idle timeout while the counters are compared.
      session.destroy();
      await expectMoves(before, { [timeout('request')]: 1 });
    } finally {
      session.destroy();
    }
  });

  test('body_idle: a body that stalls after its first bytes is dropped', { timeout: 20_000 }, async () => {
    const before = await defenceCounts();
    const raw = await openRaw(server.port, server.ca);
    const body = JSON.stringify(sampleEvent(DS));
    await raw.write(signedHead(body, creds, DS, [`Content-Length: ${Buffer.byteLength(body)}`]) + body.slice(0, 10));
    await raw.closed;
    assert.equal(raw.received(), '', 'dropped without an answer');
    await expectMoves(before, { [timeout('body_idle')]: 1 });
  });

  test('body_rate: an untrusted body crawling below --min-body-rate is dropped', { timeout: 20_000 }, async () => {
    const before = await defenceCounts();
    const raw = await openRaw(server.port, server.ca);
    const body = JSON.stringify(sampleEvent(DS, { properties: { note: 'n'.repeat(2000) } }));
    await raw.write(signedHead(body, creds, DS, [`Content-Length: ${Buffer.byteLength(body)}`]));
    // A byte every 200 ms: never idle, far below 64 KiB/s once the 2 s grace is over.
    const sent = await trickle(raw, body, 200);
    assert.ok(sent < body.length, 'the trickle was cut off');
    await expectMoves(before, { [timeout('body_rate')]: 1 }, raw.closed);
  });

  test('idle: a trusted HTTP/1.1 connection left idle past --keep-alive-timeout', { timeout: 20_000 }, async () => {
    const raw = await trustedRaw();
    const before = await defenceCounts();
    await raw.closed;
    await expectMoves(before, { [timeout('idle')]: 1 });
  });

  test('idle: a trusted HTTP/2 session left idle past --keep-alive-timeout', { timeout: 20_000 }, async () => {
    const session = await trustedSession();
    const before = await defenceCounts();
    await new Promise<void>((resolve) => session.once('close', () => resolve()));
    await expectMoves(before, { [timeout('idle')]: 1 });
  });
});

/** An HTTP/2 frame. */
function frame(type: number, flags: number, streamId: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(streamId, 5);
  return Buffer.concat([head, payload]);
}

describe('ecapi_protocol_errors_total', () => {
  test('http1: a malformed request line, answered 400 by the parser', async () => {
    const before = await defenceCounts();
    const raw = await openRaw(server.port, server.ca);
    await raw.write('NOT AN HTTP REQUEST\r\n\r\n');
    await raw.closed;
    assert.match(raw.received(), /^HTTP\/1\.1 400 Bad Request\r\n/);
    await expectMoves(before, { [protocolError('http1')]: 1 });
  });

  test('http2: a frame nghttp2 refuses (WINDOW_UPDATE of 0) ends the session with GOAWAY PROTOCOL_ERROR', async () => {
    const before = await defenceCounts();
    const socket = tls.connect({ host: '127.0.0.1', port: server.port, servername: 'localhost', ca: server.ca, ALPNProtocols: ['h2'] });
    socket.on('error', () => {});
    const received: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    await new Promise<void>((resolve) => socket.once('secureConnect', () => resolve()));
    assert.equal(socket.alpnProtocol, 'h2');
    socket.write(Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), frame(4, 0, 0), frame(8, 0, 0, Buffer.alloc(4))]));
    await closed;
    // The GOAWAY (type 7) with PROTOCOL_ERROR (1) is among the frames received.
    const data = Buffer.concat(received);
    let goaway: number | undefined;
    for (let at = 0; at + 9 <= data.length; at += 9 + data.readUIntBE(at, 3)) {
      if (data[at + 3] === 7) goaway = data.readUInt32BE(at + 9 + 4);
    }
    assert.equal(goaway, 1, 'GOAWAY PROTOCOL_ERROR');
    await expectMoves(before, { [protocolError('http2')]: 1 });
  });
});

test('handshakeFailureReasonOf: a closed mapping of the TLS layer\'s error codes', () => {
  const cases: Record<string, string> = {
    ERR_TLS_HANDSHAKE_TIMEOUT: 'timeout',
    ERR_SSL_UNSUPPORTED_PROTOCOL: 'protocol',
    ERR_SSL_NO_APPLICATION_PROTOCOL: 'protocol',
    ERR_SSL_NO_SHARED_CIPHER: 'protocol',
    ERR_SSL_WRONG_VERSION_NUMBER: 'protocol',
    ERR_SSL_TLSV1_ALERT_UNKNOWN_CA: 'certificate',
    // OpenSSL 3 spells the SSLv3 alerts `SSL/TLS`; OpenSSL 1.1 `SSLV3`.
    'ERR_SSL_SSL/TLS_ALERT_BAD_CERTIFICATE': 'certificate',
    ERR_SSL_SSLV3_ALERT_CERTIFICATE_EXPIRED: 'certificate',
    'ERR_SSL_SSL/TLS_ALERT_CERTIFICATE_REVOKED': 'certificate',
    'ERR_SSL_SSL/TLS_ALERT_CERTIFICATE_UNKNOWN': 'certificate',
    'ERR_SSL_SSL/TLS_ALERT_UNSUPPORTED_CERTIFICATE': 'certificate',
    ERR_SSL_TLSV1_ALERT_DECODE_ERROR: 'protocol',
    ECONNRESET: 'reset',
    EPIPE: 'reset',
    ERR_SOCKET_CLOSED: 'other',
    ERR_A_CODE_NODE_MAY_ADD_LATER: 'other',
  };
  for (const [code, reason] of Object.entries(cases)) assert.equal(handshakeFailureReasonOf(code), reason, code);
  assert.equal(handshakeFailureReasonOf(undefined), 'other');
});
