/**
 * Graceful shutdown on SIGTERM, with one and with two serving processes: many large requests are
 * being uploaded slowly (HTTP/1.1 and HTTP/2) when SIGTERM arrives. Every request already in
 * flight is finished and answered completely (valid JSON, full Content-Length), every 200 is in the
 * queue, requests that arrive after the signal are answered completely or not at all, and the
 * process exits 0.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import https from 'node:https';
import http2 from 'node:http2';
import { signBody } from '@ecapi-ingest/protocol';
import { exportQueue, provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import { sampleEvent } from '../helpers/https-client.js';

const DS = 'shutdown';
const PIECES = 12;
const PIECE_GAP_MS = 100;

interface Outcome {
  readonly ids: string[];
  status?: number;
  text?: string;
  error?: string;
}

/**
 * Sends a signed batch in PIECES writes, PIECE_GAP_MS apart. `connected` resolves once the SERVER
 * has the request: it answered the request's `Expect: 100-continue` with `100 Continue`, which
 * Node sends when it has parsed the request head and is about to hand the request to the
 * handler. (Issue 16: `connected` used to resolve when the first piece was written locally, which
 * on a loaded machine could be before the TLS handshake had finished; SIGTERM then found a
 * session or connection without that request, and HTTP/2 refused the stream with
 * NGHTTP2_REFUSED_STREAM, correctly: it was never in flight.) The body is sent without waiting
 * for the 100, so the requests still upload slowly across the signal.
 */
function slowPost(server: ServerProcess, creds: { keyId: string; secret: string }, tag: string, useHttp2: boolean) {
  const events = Array.from({ length: 300 }, (_, j) => sampleEvent(DS, { id: `${tag}-${j}`, ext: { note: 'n'.repeat(300) } }));
  const body = Buffer.from(JSON.stringify({ events }));
  const headers = {
    expect: '100-continue',
    'content-type': 'application/json', accept: 'application/json',
    'x-service-key-id': creds.keyId, 'x-service-data-set': DS, 'x-service-signature': signBody(body, creds.secret),
  };
  const outcome: Outcome = { ids: events.map((e) => e.id as string) };
  const piece = Math.ceil(body.length / PIECES);
  let markConnected: () => void = () => {};
  const connected = new Promise<void>((r) => (markConnected = r));
  const done = new Promise<Outcome>((resolve) => {
    let settled = false;
    const finish = (status: number | undefined, text: string | undefined, error?: string) => {
      if (settled) return;
      settled = true;
      if (status !== undefined) outcome.status = status;
      if (text !== undefined) outcome.text = text;
      if (error !== undefined) outcome.error = error;
      markConnected();
      resolve(outcome);
    };
    const pump = (write: (chunk: Buffer) => void, end: () => void, alive: () => boolean) => {
      let i = 0;
      const next = () => {
        if (!alive()) return;
        write(body.subarray(i * piece, (i + 1) * piece));
        i++;
        if (i < PIECES) setTimeout(next, PIECE_GAP_MS);
        else end();
      };
      next();
    };
    if (useHttp2) {
      const session = http2.connect(`https://localhost:${server.port}`, { ca: server.ca });
      session.on('error', (e) => finish(undefined, undefined, e.message));
      const stream = session.request({ ':method': 'POST', ':path': '/v1/events', 'content-length': body.length, ...headers });
      let status: number | undefined;
      const chunks: Buffer[] = [];
      stream.on('continue', () => markConnected());
      stream.on('response', (h) => (status = Number(h[':status'])));
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        session.close();
        finish(status, Buffer.concat(chunks).toString('utf8'));
      });
      stream.on('error', (e) => {
        session.close();
        finish(undefined, undefined, e.message);
      });
      stream.on('close', () => finish(undefined, undefined, 'stream closed without a complete response'));
      pump((c) => stream.write(c), () => stream.end(), () => !stream.destroyed);
    } else {
      const req = https.request(
        {
          host: '127.0.0.1', servername: 'localhost', port: server.port, ca: server.ca, method: 'POST', path: '/v1/events',
          agent: false, headers: { ...headers, 'content-length': body.length },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          // 'end' fires only when the whole Content-Length arrived; a cut-off body is 'aborted'/'error'.
          res.on('end', () => finish(res.statusCode, Buffer.concat(chunks).toString('utf8')));
          res.on('aborted', () => finish(undefined, undefined, 'response aborted'));
          res.on('error', (e) => finish(undefined, undefined, e.message));
        },
      );
      req.on('error', (e) => finish(undefined, undefined, e.message));
      req.on('continue', () => markConnected());
      pump((c) => req.write(c), () => req.end(), () => !req.destroyed);
    }
  });
  return { connected, done };
}

for (const workers of [1, 2]) {
  describe(`SIGTERM with --workers ${workers}`, () => {
    test('in-flight requests finish with complete JSON answers, every 200 is queued, exit code 0', { timeout: 120_000 }, async () => {
      const dataDir = tempDataDir('ecapi-shutdown-');
      const creds = await provision(dataDir, [DS]);
      const server = await startServer({ dataDir, args: ['--workers', String(workers)] });
      const inFlight = Array.from({ length: 16 }, (_, i) => slowPost(server, creds, `w${workers}-r${i}`, i % 2 === 1));
      await Promise.all(inFlight.map((r) => r.connected));
      // Every request is mid-upload: a third of its body is on the wire.
      await new Promise((r) => setTimeout(r, PIECE_GAP_MS * 4));
      const exited = server.stop('SIGTERM');
      // Requests that arrive after the signal: answered completely, or refused at the connection.
      await new Promise((r) => setTimeout(r, 50));
      const late = Array.from({ length: 4 }, (_, i) => slowPost(server, creds, `w${workers}-late${i}`, i % 2 === 1));
      const outcomes = await Promise.all(inFlight.map((r) => r.done));
      const lateOutcomes = await Promise.all(late.map((r) => r.done));
      assert.equal(await exited, 0, `exit code 0:\n${server.output().slice(-2000)}`);

      for (const o of outcomes) {
        assert.equal(o.error, undefined, `an in-flight request was cut off: ${o.error} ${JSON.stringify(outcomes.map((x) => [x.status, x.error, x.text?.slice(0, 80)]))}`);
        assert.equal(o.status, 200, JSON.stringify(outcomes.map((x) => [x.status, x.error, x.text?.slice(0, 80)])));
        assert.equal(o.status, 200, o.text);
        assert.deepEqual(JSON.parse(o.text!), { accepted: 300 });
      }
      for (const o of lateOutcomes) {
        if (o.status === undefined) continue; // never answered: allowed after the signal
        assert.doesNotThrow(() => JSON.parse(o.text!), `a late response is complete JSON: ${o.text}`);
      }
      const queued = new Map<string, number>();
      for (const r of await exportQueue(dataDir)) queued.set(r.event.id, (queued.get(r.event.id) ?? 0) + 1);
      for (const o of [...outcomes, ...lateOutcomes]) {
        if (o.status !== 200) continue;
        for (const id of o.ids) assert.equal(queued.get(id), 1, `acknowledged event ${id} is queued`);
      }
      assert.ok(server.output().includes('"ecapi-ingest stopped"'), 'the service logged a clean stop');
    });
  });
}
