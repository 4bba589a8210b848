/**
 * Issue 16, point 8: HTTP details, byte by byte over raw TLS (HTTP/1.1) and over HTTP/2.
 * - an HTTP/1.1 request without Host is refused: 400 `missing Host header: …`;
 * - a body coding the service would not decode is refused instead of ignored: `Content-Encoding`
 *   other than identity, `Transfer-Encoding` other than chunked alone (400, with what to send);
 * - a signed POST pipelined behind a request answered 403-and-close is never committed;
 * - whenever the connection closes after a response, the response says `Connection: close`, so a
 *   keep-alive client never sends its next request into a closing socket.
 * Every refused event id is checked to be absent from the queue at the end.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import https from 'node:https';
import { gzipSync } from 'node:zlib';
import { MAX_BODY_BYTES } from '@ecapi-ingest/protocol';
import { exportQueue, provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import { postSigned, sampleEvent, type Credentials } from '../helpers/https-client.js';
import { openRaw, parseResponses, signedHead, sleep } from '../helpers/raw-tls.js';

const DS = 'details';
let server: ServerProcess;
let dataDir: string;
let creds: Credentials;
const neverQueued = new Set<string>();

before(async () => {
  dataDir = tempDataDir();
  creds = await provision(dataDir, [DS]);
  server = await startServer({ dataDir, args: ['--workers', '1', '--no-worker'] });
});
after(async () => {
  const ids = new Set((await exportQueue(dataDir)).map((r) => r.event.id));
  for (const id of neverQueued) assert.ok(!ids.has(id), `${id} must not be queued`);
  assert.equal(await server.stop(), 0);
});

function body(id: string): string {
  neverQueued.add(id);
  return JSON.stringify(sampleEvent(DS, { id }));
}

/** Writes `bytes` on a fresh raw TLS connection; resolves with the parsed responses once the server closed it. */
async function exchange(bytes: string | Buffer) {
  const raw = await openRaw(server.port, server.ca);
  raw.socket.on('error', () => {});
  await raw.write(bytes);
  const { afterMs } = await Promise.race([raw.closed, sleep(8000).then(() => ({ afterMs: Infinity }))]);
  raw.destroy();
  return { responses: parseResponses(raw.received()), text: raw.received(), afterMs };
}

describe('Host header', () => {
  test('an HTTP/1.1 request without Host: 400 with a reason, Connection: close, nothing queued', async () => {
    const b = body('no-host');
    const head = signedHead(b, creds, DS, [`Content-Length: ${b.length}`]).replace('Host: localhost\r\n', '');
    const { responses, text, afterMs } = await exchange(head + b);
    assert.equal(responses.length, 1, text);
    assert.equal(responses[0]!.status, 400, text);
    assert.deepEqual(JSON.parse(responses[0]!.body), { error: 'missing Host header: send the Host header (HTTP/1.1) or :authority (HTTP/2) naming this service' });
    assert.equal(responses[0]!.headers.connection, 'close');
    assert.ok(afterMs < 5000, 'the connection was closed');
  });

  test('with Host the same request is accepted', async () => {
    const b = JSON.stringify(sampleEvent(DS, { id: 'with-host' }));
    const { responses, text } = await exchange(signedHead(b, creds, DS, [`Content-Length: ${b.length}`, 'Connection: close']) + b);
    assert.equal(responses[0]?.status, 200, text);
  });
});

describe('body codings that are not decoded are refused', () => {
  const teMessage = 'unsupported Transfer-Encoding: send Content-Length, or Transfer-Encoding: chunked alone (no compression)';
  const ceMessage = 'unsupported Content-Encoding: bodies are not decoded; send the JSON uncompressed, without Content-Encoding';

  test('Transfer-Encoding: gzip, chunked (well framed, plain JSON inside): 400, closed, nothing queued', async () => {
    const b = body('te-gzip-chunked');
    const framed = `${b.length.toString(16)}\r\n${b}\r\n0\r\n\r\n`;
    const { responses, text } = await exchange(signedHead(b, creds, DS, ['Transfer-Encoding: gzip, chunked']) + framed);
    assert.equal(responses[0]?.status, 400, text);
    assert.deepEqual(JSON.parse(responses[0]!.body), { error: teMessage });
    assert.equal(responses[0]!.headers.connection, 'close');
  });

  for (const coding of ['gzip', 'br', 'deflate', 'x-custom']) {
    test(`Content-Encoding: ${coding} on plain JSON: 400, closed, nothing queued`, async () => {
      const b = body(`ce-${coding}`);
      const { responses, text } = await exchange(signedHead(b, creds, DS, [`Content-Length: ${b.length}`, `Content-Encoding: ${coding}`]) + b);
      assert.equal(responses[0]?.status, 400, text);
      assert.deepEqual(JSON.parse(responses[0]!.body), { error: ceMessage });
      assert.equal(responses[0]!.headers.connection, 'close');
    });
  }

  test('Content-Encoding: gzip on a gzipped body signed as sent: 400 too (the service never decodes)', async () => {
    const zipped = gzipSync(Buffer.from(body('ce-gzip-real')));
    const { responses, text } = await exchange(Buffer.concat([Buffer.from(signedHead(zipped, creds, DS, [`Content-Length: ${zipped.length}`, 'Content-Encoding: gzip'])), zipped]));
    assert.equal(responses[0]?.status, 400, text);
    assert.equal(JSON.parse(responses[0]!.body).error, ceMessage);
  });

  test('Content-Encoding: gzip over HTTP/2: 400', async () => {
    const b = body('ce-gzip-h2');
    const res = await postSigned(server.port, server.ca, creds, DS, b, { http2: true, headers: { 'content-encoding': 'gzip' } });
    assert.equal(res.status, 400, res.text);
    assert.equal(res.json().error, ceMessage);
  });

  test('Content-Encoding: identity and Transfer-Encoding: chunked alone are accepted', async () => {
    const a = JSON.stringify(sampleEvent(DS, { id: 'ce-identity' }));
    const res = await postSigned(server.port, server.ca, creds, DS, a, { headers: { 'content-encoding': 'identity' } });
    assert.equal(res.status, 200, res.text);
    const c = JSON.stringify(sampleEvent(DS, { id: 'te-chunked' }));
    const chunked = await postSigned(server.port, server.ca, creds, DS, c, { chunked: 16 });
    assert.equal(chunked.status, 200, chunked.text);
  });
});

describe('closing the connection', () => {
  test('a signed POST pipelined behind a request answered 403-and-close is never committed', async () => {
    const b = body('pipelined-after-403');
    const first = 'GET /v1/events HTTP/1.1\r\nHost: localhost\r\n\r\n';
    const second = signedHead(b, creds, DS, [`Content-Length: ${b.length}`]) + b;
    const { responses, text } = await exchange(first + second);
    await sleep(300);
    const queued = (await exportQueue(dataDir)).filter((r) => r.event.id === 'pipelined-after-403');
    assert.equal(queued.length, 0, 'the pipelined request was committed');
    assert.equal(responses.length, 1, `one answer only: ${text}`);
    assert.equal(responses[0]!.status, 403);
    assert.equal(responses[0]!.headers.connection, 'close');
  });

  test('a body over 1 MiB by Content-Length: 400 with Connection: close', async () => {
    const b = body('over-limit-cl');
    const { responses, text } = await exchange(signedHead(b, creds, DS, [`Content-Length: ${MAX_BODY_BYTES + 1}`]) + b);
    assert.equal(responses[0]?.status, 400, text);
    assert.equal(JSON.parse(responses[0]!.body).error, 'payload exceeds 1 MB limit');
    assert.equal(responses[0]!.headers.connection, 'close');
  });

  test('a chunked body that passes 1 MiB while streaming: 400 with Connection: close', async () => {
    neverQueued.add('over-limit-chunked');
    const raw = await openRaw(server.port, server.ca);
    raw.socket.on('error', () => {});
    await raw.write(signedHead('x', creds, DS, ['Transfer-Encoding: chunked']));
    const piece = `${(64 * 1024).toString(16)}\r\n${' '.repeat(64 * 1024)}\r\n`;
    for (let i = 0; i < 20 && !raw.isClosed() && parseResponses(raw.received()).length === 0; i++) await raw.write(piece);
    await Promise.race([raw.closed, sleep(8000)]);
    raw.destroy();
    const [res] = parseResponses(raw.received());
    assert.equal(res?.status, 400, raw.received());
    assert.equal(res!.headers.connection, 'close');
  });

  test('a keep-alive client that got a 400 for its size sends its next request on a new connection, not into a closed one', async () => {
    const agent = new https.Agent({ keepAlive: true, maxSockets: 1, ca: server.ca });
    const post = (payload: string, contentLength: number) =>
      new Promise<{ status: number; text: string }>((resolve, reject) => {
        const req = https.request({
          host: '127.0.0.1', servername: 'localhost', port: server.port, method: 'POST', path: '/v1/events', agent,
          headers: {
            'content-type': 'application/json', 'content-length': contentLength, 'x-service-key-id': creds.keyId,
            'x-service-data-set': DS, 'x-service-signature': 'ab'.repeat(32),
          },
        }, (res) => {
          let text = '';
          res.setEncoding('utf8').on('data', (c: string) => (text += c)).on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        });
        req.on('error', reject);
        // The oversized request announces more than it sends: the answer comes from the head.
        req.end(payload);
      });
    try {
      const tooLarge = await post('{}', MAX_BODY_BYTES + 1).catch((e: Error) => ({ status: -1, text: e.message }));
      assert.equal(tooLarge.status, 400, tooLarge.text);
      // At once, on the same agent: the socket must not be reused (Connection: close), else the
      // request goes into a connection the server is closing (ECONNRESET / socket hang up).
      const again = await post('{}', 2).catch((e: Error) => ({ status: -1, text: e.message }));
      assert.equal(again.status, 401, again.text);
    } finally {
      agent.destroy();
    }
  });
});
