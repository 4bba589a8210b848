/**
 * Connections that never authenticate cannot be held open (audit finding: an HTTP/2 session lived
 * on after any number of refused requests, and every refused stream reset its idle timer, so one
 * bogus request per ~50 s held a session forever). Black-box against the real `serve` process over
 * real TLS 1.3, with node:http2 clients and raw HTTP/1.1:
 * - a connection on which no request passed the HMAC is ended by the answer to its 3rd refused
 *   request (HTTP/2 GOAWAY, HTTP/1.1 Connection: close, also for a 401 after the body);
 * - a trusted connection (one signed request passed) is never counted;
 * - an untrusted HTTP/2 session is sent GOAWAY at its deadline (--keep-alive-timeout after the
 *   handshake) even while it keeps a stream busy, and that stream still gets its answer;
 * - past --max-connections (a second server, cap 2) the oldest untrusted connection is dropped;
 * - each of these closes shows on the admin port's /metrics (through the primary of --workers 1,
 *   which aggregates its workers' metrics): ecapi_untrusted_connections_closed_total by reason
 *   rises by exactly one, and ecapi_public_connections / ecapi_untrusted_connections count the
 *   connections open and those not yet trusted.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import { once } from 'node:events';
import { signBody } from '@ecapi-ingest/protocol';
import { provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import { sampleEvent, type Credentials } from '../helpers/https-client.js';
import { openRaw, parseResponses, signedHead } from '../helpers/raw-tls.js';
import { metricsText, metricValue, waitFor } from '../helpers/fault-tools.js';

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

/** One sample of /metrics (`name` or `name{label="value"}`); it must be there. */
async function metric(sample: string, target: ServerProcess = server): Promise<number> {
  const value = metricValue(await metricsText(target.adminPort), sample);
  assert.ok(!Number.isNaN(value), `${sample} in /metrics`);
  return value;
}

/** ecapi_untrusted_connections_closed_total{reason}. */
const closedFor = (reason: 'deadline' | 'refusals' | 'connection_cap', target: ServerProcess = server) =>
  metric(`ecapi_untrusted_connections_closed_total{reason="${reason}"}`, target);

/** Waits until /metrics shows `expected` (the workers report to the primary when it asks, at the scrape). */
async function metricBecomes(sample: string, expected: number, target: ServerProcess = server): Promise<void> {
  let last = Number.NaN;
  await waitFor(`${sample} = ${expected}`, async () => (last = await metric(sample, target)) === expected || undefined, 10_000)
    .catch((error: Error) => assert.fail(`${error.message} (last seen ${last})`));
}

function h2Session(target: ServerProcess = server): { session: http2.ClientHttp2Session; goaway: () => boolean } {
  const session = http2.connect(`https://localhost:${target.port}`, { ca: target.ca, minVersion: 'TLSv1.3' });
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
  test('HTTP/2: the 3rd refusal ends the session with GOAWAY; no 4th request is served; counted as reason refusals', async () => {
    const before = await closedFor('refusals');
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
    await metricBecomes('ecapi_untrusted_connections_closed_total{reason="refusals"}', before + 1);
  });

  test('HTTP/2: a wrong signature for a known key id (401 after the body) counts the same', async () => {
    const before = await closedFor('refusals');
    const { session, goaway } = h2Session();
    const guesser = { keyId: creds.keyId, secret: 'guessed' };
    for (let i = 0; i < 3; i++) assert.equal(await post(session, guesser), 401);
    assert.equal(await post(session, guesser), 'refused');
    await waitFor('the session to close', async () => (session.closed || session.destroyed ? true : undefined), 5000);
    assert.equal(goaway(), true);
    await metricBecomes('ecapi_untrusted_connections_closed_total{reason="refusals"}', before + 1);
  });

  test('HTTP/2: a session on which a signed request passed is never counted; the gauges see it become trusted', async () => {
    const before = await closedFor('refusals');
    const { session, goaway } = h2Session();
    try {
      // The earlier tests' connections are gone: this session is the only one, untrusted until its first signed request.
      await metricBecomes('ecapi_public_connections', 1);
      await metricBecomes('ecapi_untrusted_connections', 1);
      assert.equal(await post(session, creds), 200);
      assert.equal(await metric('ecapi_untrusted_connections'), 0);
      assert.equal(await metric('ecapi_public_connections'), 1);
      for (let i = 0; i < 6; i++) assert.equal(await post(session, stranger), 401);
      assert.equal(await post(session, creds), 200);
      assert.equal(goaway(), false);
      assert.equal(await closedFor('refusals'), before);
    } finally {
      session.close();
    }
    await metricBecomes('ecapi_public_connections', 0);
  });

  test('HTTP/1.1: the 3rd 401 after the body (known key id, wrong signature) closes the connection; counted as reason refusals', async () => {
    const before = await closedFor('refusals');
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
    await metricBecomes('ecapi_untrusted_connections_closed_total{reason="refusals"}', before + 1);
  });
});

describe('the deadline of an untrusted connection', () => {
  test('HTTP/2: GOAWAY at --keep-alive-timeout after the handshake even with a stream kept busy; the stream still gets its answer; counted as reason deadline', async () => {
    const before = await closedFor('deadline');
    const refusals = await closedFor('refusals');
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
    await metricBecomes('ecapi_untrusted_connections_closed_total{reason="deadline"}', before + 1);
    assert.equal(await closedFor('refusals'), refusals, 'one close, one reason');
  });
});

describe('the connection cap (--max-connections 2)', () => {
  let capped: ServerProcess;
  let cappedCreds: Credentials;
  before(async () => {
    const dataDir = tempDataDir();
    cappedCreds = await provision(dataDir, [DS]);
    capped = await startServer({ dataDir, args: ['--workers', '1', '--no-worker', '--max-connections', '2'] });
  });
  after(async () => {
    assert.equal(await capped.stop(), 0);
  });

  test('past it the oldest untrusted connection is dropped, the trusted one stays; counted as reason connection_cap', async () => {
    assert.equal(await closedFor('connection_cap', capped), 0);
    const { session, goaway } = h2Session(capped);
    const idle = [await openRaw(capped.port, capped.ca)];
    try {
      assert.equal(await post(session, cappedCreds), 200);
      await metricBecomes('ecapi_public_connections', 2, capped);
      await metricBecomes('ecapi_untrusted_connections', 1, capped);
      // A third connection: the idle untrusted one, the oldest, makes room; the signed session stays.
      idle.push(await openRaw(capped.port, capped.ca));
      await idle[0]!.closed;
      await metricBecomes('ecapi_untrusted_connections_closed_total{reason="connection_cap"}', 1, capped);
      assert.equal(await metric('ecapi_public_connections', capped), 2);
      assert.equal(await metric('ecapi_untrusted_connections', capped), 1);
      assert.equal(await post(session, cappedCreds), 200);
      assert.equal(goaway(), false);
      assert.equal(await closedFor('deadline', capped), 0);
      assert.equal(await closedFor('refusals', capped), 0);
    } finally {
      for (const raw of idle) raw.destroy();
      session.close();
    }
  });
});
