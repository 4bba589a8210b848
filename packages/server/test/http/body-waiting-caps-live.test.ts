/**
 * Black-box, against the real `serve` process over real TLS 1.3: requests without a secret that
 * wait for the body budget are capped (audit of 2026-11-27, finding 1: 8 HTTP/2 sessions of 256
 * streams, each sending body data under a known key id, held 407 MB for 30 s, with no refusal).
 *
 * The attacker (from 127.0.0.2, so that its address is not the senders') knows a real key id but
 * not the secret. With a 4 MiB body buffer the untrusted share is 1 MiB: its first 1 MiB body is
 * admitted and every later one waits, so what is asserted is exact: at most 8 waiting streams per
 * session and 128 in all, every other stream refused at once with RST_STREAM REFUSED_STREAM, an
 * HTTP/1.1 request past the cap answered 429 with Retry-After and its connection closed, and signed
 * senders still answered meanwhile. /metrics (the primary's aggregate of its worker) counts both
 * kinds of refusal: the reset streams in ecapi_http2_streams_refused_total{limit="body_wait"}, the
 * 429 in ecapi_rate_limited_total{limit="body_wait"}, each exactly; and the connections open and
 * not yet trusted in ecapi_public_connections and ecapi_untrusted_connections.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import { signBody } from '@ecapi-ingest/protocol';
import { provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import { postSigned, sampleEvent, type Credentials } from '../helpers/https-client.js';
import { openRaw } from '../helpers/raw-tls.js';
import { metricsText, metricValue, waitFor } from '../helpers/fault-tools.js';

const DS = 'caps';
const ATTACKER = '127.0.0.2';
const MIB = 1024 * 1024;
let server: ServerProcess;
let creds: Credentials;

before(async () => {
  const dataDir = tempDataDir();
  creds = await provision(dataDir, [DS]);
  server = await startServer({ dataDir, args: ['--workers', '1', '--no-worker', '--body-buffer', '4', '--failed-auth-burst', '100000'] });
});
after(async () => {
  assert.equal(await server.stop(), 0);
});

/** One sample of /metrics (`name` or `name{label="value"}`); it must be there. */
async function metric(name: string): Promise<number> {
  const value = metricValue(await metricsText(server.adminPort), name);
  assert.ok(!Number.isNaN(value), `${name} in /metrics`);
  return value;
}

function batch(prefix: string, events: number): string {
  return JSON.stringify({ events: Array.from({ length: events }, (_, i) => sampleEvent(DS, { id: `${prefix}-${i}`, properties: { note: 'n'.repeat(1000) } })) });
}

/** One signed request on `session`; resolves with the status. */
function signedOn(session: http2.ClientHttp2Session, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const stream = session.request({
      ':method': 'POST', ':path': '/v1/events', 'content-type': 'application/json', accept: 'application/json',
      'x-service-key-id': creds.keyId, 'x-service-data-set': DS, 'x-service-signature': signBody(body, creds.secret),
    });
    let status = 0;
    stream.on('response', (headers) => (status = Number(headers[':status'])));
    stream.on('error', reject);
    stream.resume();
    stream.on('end', () => resolve(status));
    stream.end(body);
  });
}

test('untrusted HTTP/2 streams waiting for the body budget are capped per session and in all; the rest are refused at once', { timeout: 60_000 }, async () => {
  assert.equal(await metric('ecapi_http2_streams_refused_total{limit="body_wait"}'), 0);
  // A signed sender whose session is trusted before the attack.
  const sender = http2.connect(`https://localhost:${server.port}`, { ca: server.ca, minVersion: 'TLSv1.3' });
  sender.on('error', () => {});
  assert.equal(await signedOn(sender, JSON.stringify(sampleEvent(DS))), 200);

  // 20 sessions x 10 streams, each declaring 1 MiB and sending its first 16 KiB.
  const SESSIONS = 20;
  const STREAMS = 10;
  const closes = { refused: 0, other: 0 };
  const attackers = Array.from({ length: SESSIONS }, () => {
    const session = http2.connect(`https://localhost:${server.port}`, { ca: server.ca, localAddress: ATTACKER, peerMaxConcurrentStreams: 1000 } as http2.SecureClientSessionOptions);
    session.on('error', () => {});
    for (let i = 0; i < STREAMS; i++) {
      const stream = session.request({
        ':method': 'POST', ':path': '/v1/events', 'content-type': 'application/json', 'content-length': String(MIB),
        'x-service-key-id': creds.keyId, 'x-service-data-set': DS, 'x-service-signature': 'cd'.repeat(32),
      }, { endStream: false });
      stream.on('error', () => {});
      stream.on('close', () => {
        if (stream.rstCode === http2.constants.NGHTTP2_REFUSED_STREAM) closes.refused++;
        else closes.other++;
      });
      stream.write(Buffer.alloc(16 * 1024, 0x61));
    }
    return session;
  });
  try {
    // One body admitted (the untrusted share is free), 8 waiting on each of 16 sessions (128 in all),
    // and every other stream refused: 200 - 1 - 128.
    await waitFor('71 streams refused', () => closes.refused >= 71 || undefined, 20_000);
    await waitFor('128 requests waiting', async () => (await metric('ecapi_requests_waiting_for_body_budget')) === 128 || undefined);
    assert.equal(closes.refused, 71);
    assert.equal(closes.other, 0, 'no stream that waits or was admitted was ended');
    assert.equal(await metric('ecapi_request_body_bytes_in_flight'), MIB, 'one untrusted body admitted');
    // Every reset counted, none of them as a 429; the 20 attacking sessions untrusted, the sender's not.
    assert.equal(await metric('ecapi_http2_streams_refused_total{limit="body_wait"}'), 71);
    assert.equal(metricValue(await metricsText(server.adminPort), 'ecapi_rate_limited_total{limit="body_wait"}') || 0, 0, 'no 429 yet');
    assert.equal(await metric('ecapi_public_connections'), SESSIONS + 1);
    assert.equal(await metric('ecapi_untrusted_connections'), SESSIONS);

    // HTTP/1.1 past the cap: answered 429 with Retry-After, the connection closed, the body not read.
    const raw = await openRaw(server.port, server.ca, { localAddress: ATTACKER });
    raw.socket.on('error', () => {});
    await raw.write([
      'POST /v1/events HTTP/1.1', 'Host: localhost', 'Content-Type: application/json',
      `X-Service-Key-Id: ${creds.keyId}`, `X-Service-Data-Set: ${DS}`, `X-Service-Signature: ${'ab'.repeat(32)}`,
      `Content-Length: ${MIB}`, '', '',
    ].join('\r\n') + 'a'.repeat(16 * 1024));
    await waitFor('the HTTP/1.1 connection past the cap to be closed', () => raw.isClosed() || undefined);
    assert.match(raw.received(), /^HTTP\/1\.1 429 [^]*\r\nretry-after: 1\r\n[^]*rate limit exceeded: too many request bodies/i);
    assert.equal(await metric('ecapi_requests_waiting_for_body_budget'), 128);
    assert.equal(await metric('ecapi_rate_limited_total{limit="body_wait"}'), 1, 'the HTTP/1.1 refusal is a 429');
    assert.equal(await metric('ecapi_http2_streams_refused_total{limit="body_wait"}'), 71, 'and not a reset stream');

    // Signed senders meanwhile: a 200 KB batch on the trusted session, a single event on a new one.
    assert.equal(await signedOn(sender, batch('trusted', 180)), 200);
    const fresh = await postSigned(server.port, server.ca, creds, DS, JSON.stringify(sampleEvent(DS)), { http2: true });
    assert.equal(fresh.status, 200, fresh.text);
  } finally {
    for (const session of attackers) session.destroy();
    sender.close();
  }
  // The attacker gone, everything it held is given back.
  await waitFor('the budget to be free', async () => ((await metric('ecapi_requests_waiting_for_body_budget')) === 0 && (await metric('ecapi_request_body_bytes_in_flight')) === 0) || undefined);
});
