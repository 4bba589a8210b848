/**
 * Connections that never authenticate cannot be held open (audit finding: an HTTP/2 session lived
 * on after any number of refused requests, and every refused stream reset its idle timer, so one
 * bogus request per ~50 s held a session forever). Black-box against the real `serve` process over
 * real TLS 1.3, with node:http2 clients and raw HTTP/1.1:
 * - a connection on which no request passed the HMAC is ended by the answer to its 3rd refused
 *   request (HTTP/2 GOAWAY, HTTP/1.1 Connection: close, also for a 401 after the body);
 * - a trusted connection (one signed request passed) is never counted;
 * - an untrusted HTTP/2 session is sent GOAWAY at its deadline (--keep-alive-timeout after the
 *   handshake) even while it keeps a stream busy, and that stream still gets its answer.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import { once } from 'node:events';
import { signBody } from '@ecapi-ingest/protocol';
import { provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import { sampleEvent, type Credentials } from '../helpers/https-client.js';
import { openRaw, parseResponses, signedHead } from '../helpers/raw-tls.js';
import { waitFor } from '../helpers/fault-tools.js';

const DS = 'untrusted';
let server: ServerProcess;
let creds: Credentials;
const stranger: Credentials = { keyId: 'no-such-key', secret: 'x' };

before(async () => {
  const dataDir = tempDataDir();
  creds = await provision(dataDir, [DS]);
  server = await startServer({
    dataDir,
    // Never shed within the test; a short keep-alive so that the untrusted deadline is within reach.
    args: ['--workers', '1', '--no-worker', '--failed-auth-burst', '100000', '--keep-alive-timeout', '3s', '--body-idle-timeout', '20s'],
  });
});
after(async () => {
  assert.equal(await server.stop(), 0);
});

function h2Session(): { session: http2.ClientHttp2Session; goaway: () => boolean } {
  const session = http2.connect(`https://localhost:${server.port}`, { ca: server.ca, minVersion: 'TLSv1.3' });
  session.on('error', () => {});
  let goaway = false;
  session.on('goaway', () => (goaway = true));
  return { session, goaway: () => goaway };
}

/** One POST on `session` signed with `who`; resolves the status, or 'refused' when the stream never got an answer. */
async function post(session: http2.ClientHttp2Session, who: Credentials): Promise<number | 'refused'> {
  const body = JSON.stringify(sampleEvent(DS));
  try {
    const stream = session.request({
      ':method': 'POST', ':path': '/v1/events', 'content-type': 'application/json', accept: 'application/json',
      'x-service-key-id': who.keyId, 'x-service-data-set': DS, 'x-service-signature': signBody(body, who.secret),
    });
    stream.on('error', () => {});
    stream.end(body);
    const status = await new Promise<number | 'refused'>((resolve) => {
      stream.once('response', (h) => resolve(Number(h[':status'])));
      stream.once('close', () => resolve('refused'));
    });
    stream.resume();
    return status;
  } catch {
    return 'refused';
  }
}

describe('refused requests on a connection that never authenticated', () => {
  test('HTTP/2: the 3rd refusal ends the session with GOAWAY; no 4th request is served', async () => {
    const { session, goaway } = h2Session();
    const closed = once(session, 'close');
    assert.equal(await post(session, stranger), 401);
    assert.equal(await post(session, stranger), 401);
    assert.equal(goaway(), false, 'two refusals: the session lives on');
    assert.equal(await post(session, stranger), 401);
    // Whether the GOAWAY is read before or after the client sends a 4th request, it is not served.
    assert.equal(await post(session, stranger), 'refused');
    await closed;
    assert.equal(goaway(), true, 'the server sent GOAWAY');
  });

  test('HTTP/2: a wrong signature for a known key id (401 after the body) counts the same', async () => {
    const { session, goaway } = h2Session();
    const guesser = { keyId: creds.keyId, secret: 'guessed' };
    for (let i = 0; i < 3; i++) assert.equal(await post(session, guesser), 401);
    assert.equal(await post(session, guesser), 'refused');
    await waitFor('the session to close', async () => (session.closed || session.destroyed ? true : undefined), 5000);
    assert.equal(goaway(), true);
  });

  test('HTTP/2: a session on which a signed request passed is never counted', async () => {
    const { session, goaway } = h2Session();
    try {
      assert.equal(await post(session, creds), 200);
      for (let i = 0; i < 6; i++) assert.equal(await post(session, stranger), 401);
      assert.equal(await post(session, creds), 200);
      assert.equal(goaway(), false);
    } finally {
      session.close();
    }
  });

  test('HTTP/1.1: the 3rd 401 after the body (known key id, wrong signature) closes the connection', async () => {
    const raw = await openRaw(server.port, server.ca);
    const guesser = { keyId: creds.keyId, secret: 'guessed' };
    for (let i = 1; i <= 3; i++) {
      const body = JSON.stringify(sampleEvent(DS));
      await raw.write(signedHead(body, guesser, DS, [`Content-Length: ${Buffer.byteLength(body)}`]) + body);
      await waitFor(`answer ${i}`, async () => (parseResponses(raw.received()).length >= i ? true : undefined), 5000);
    }
    const answers = parseResponses(raw.received());
    assert.deepEqual(answers.map((a) => a.status), [401, 401, 401]);
    assert.notEqual(answers[0]!.headers.connection, 'close', 'the first refusals keep the connection (a client may be mid-rotation)');
    assert.equal(answers[2]!.headers.connection, 'close');
    await raw.closed;
  });
});

describe('the deadline of an untrusted connection', () => {
  test('HTTP/2: GOAWAY at --keep-alive-timeout after the handshake even with a stream kept busy; the stream still gets its answer', async () => {
    const { session, goaway } = h2Session();
    const guesser = { keyId: creds.keyId, secret: 'guessed' };
    const body = JSON.stringify(sampleEvent(DS));
    const stream = session.request({
      ':method': 'POST', ':path': '/v1/events', 'content-type': 'application/json', accept: 'application/json',
      'x-service-key-id': guesser.keyId, 'x-service-data-set': DS, 'x-service-signature': signBody(body, guesser.secret),
      'content-length': String(Buffer.byteLength(body)),
    });
    stream.on('error', () => {});
    const response = new Promise<number>((resolve) => stream.once('response', (h) => resolve(Number(h[':status']))));
    // A byte every 200 ms: the session is never idle (Node's own idle timer would never fire).
    let sent = 0;
    const trickle = setInterval(() => {
      if (sent < body.length - 1 && !goaway()) stream.write(body[sent++]!);
    }, 200);
    try {
      await waitFor('GOAWAY from the server', async () => (goaway() ? true : undefined), 10_000);
    } finally {
      clearInterval(trickle);
    }
    assert.ok(sent < body.length - 1, 'GOAWAY came while the body was still being sent');
    // The stream under way finishes: its answer is the 401 of a wrong signature.
    stream.end(body.slice(sent));
    assert.equal(await response, 401);
    await waitFor('the session to close', async () => (session.closed || session.destroyed ? true : undefined), 5000);
  });
});
