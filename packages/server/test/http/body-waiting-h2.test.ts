/**
 * HTTP/2 requests waiting for the body budget (audit of 2026-11-27, findings 1 and 2), with the
 * real components: an in-process TLS 1.3 HTTP/2 server whose handler is the real BodyReader
 * (http/body-reader.ts) under a real BodyBudget, a real node:http2 client, and the real sweep
 * (http/body-sweep.ts) called by the test at a clock the test sets: what is asserted is the sweep's
 * decision at a given time, never how long something took.
 */
import { afterEach, before, test } from 'node:test';
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { BodyBudget } from '../../src/http/body-budget.js';
import { BodyReader, type ReaderHost } from '../../src/http/body-reader.js';
import { sweepBodies, type BodySweepLimits, type BodyWatch } from '../../src/http/body-sweep.js';
import type { Logger } from '../../src/observability/logger.js';
import type { FailedAuthShedder } from '../../src/rate-limit/failed-auth-shedder.js';
import { loadTlsMaterial } from '../../src/tls/tls-material.js';
import { waitFor } from '../helpers/fault-tools.js';
import { tempDataDir } from '../helpers/server-process.js';

const KIB = 1024;
const LIMITS: BodySweepLimits = { requestTimeoutMs: 30_000, bodyIdleTimeoutMs: 1000, minBodyBytesPerSecond: 0 };

let cert: string;
let key: string;
before(async () => {
  ({ cert, key } = await loadTlsMaterial({ dataDir: tempDataDir() }));
});

interface Harness {
  readonly host: ReaderHost;
  readonly budget: BodyBudget;
  /** Readers by the request's :path. */
  readonly readers: Map<string, BodyReader>;
  readonly dropped: string[];
  readonly failures: string[];
  sweep(clock: number): void;
  request(path: string, contentLength: number, untrusted?: boolean): http2.ClientHttp2Stream;
  close(): Promise<void>;
}

const opened: Harness[] = [];
afterEach(async () => {
  for (const h of opened.splice(0)) await h.close();
});

/** A server whose handler reads bodies with BodyReader and answers 200 with the body's length. */
async function harness(budget: BodyBudget): Promise<Harness> {
  const host: ReaderHost = { clock: 0, budget, watched: new Set<BodyWatch>() };
  const readers = new Map<string, BodyReader>();
  const server = http2.createSecureServer({ cert, key, minVersion: 'TLSv1.3' });
  server.on('request', (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => {
    const reader = new BodyReader(
      req, req.url, '127.0.0.1', 'key_test', req.headers['x-untrusted'] === '1', host,
      (body) => res.end(String(body.length)),
      () => res.writeHead(400).end('too large'),
    );
    readers.set(req.url, reader);
    res.on('close', () => reader.closed());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const client = http2.connect(`https://localhost:${(server.address() as AddressInfo).port}`, { ca: cert, peerMaxConcurrentStreams: 1000 } as http2.SecureClientSessionOptions);
  client.on('error', () => {});
  const dropped: string[] = [];
  const failures: string[] = [];
  const logger = { info: (fields: { dropped: string; request_id: string }) => dropped.push(`${fields.request_id} ${fields.dropped}`) } as unknown as Logger;
  const failedAuth = { recordFailure: (address: string) => failures.push(address) } as unknown as FailedAuthShedder;
  const h: Harness = {
    host, budget, readers, dropped, failures,
    sweep(clock) {
      host.clock = clock;
      sweepBodies(host.watched, clock, LIMITS, logger, failedAuth);
    },
    request(path, contentLength, untrusted = false) {
      const stream = client.request({ ':method': 'POST', ':path': path, 'content-length': String(contentLength), ...(untrusted ? { 'x-untrusted': '1' } : {}) }, { endStream: false });
      stream.on('error', () => {});
      return stream;
    },
    async close() {
      client.destroy();
      server.close();
    },
  };
  opened.push(h);
  return h;
}

/** The server-side stream of `path`, once its first body bytes arrived. */
function serverStream(h: Harness, path: string): Promise<http2.ServerHttp2Stream> {
  return waitFor(`${path} to reach the server`, () => {
    const reader = h.readers.get(path);
    return reader !== undefined && reader.bytes > 0 ? (reader.req as http2.Http2ServerRequest).stream : undefined;
  });
}

function answer(stream: http2.ClientHttp2Stream): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    let status = 0;
    let body = '';
    stream.on('response', (headers) => (status = Number(headers[':status'])));
    stream.setEncoding('utf8').on('data', (text: string) => (body += text));
    stream.on('end', () => resolve({ status, body }));
    stream.on('close', () => (status === 0 ? reject(new Error(`closed without an answer (rst ${stream.rstCode})`)) : undefined));
  });
}

test('waiting requests expiring together give their room back without one of them being admitted: no body buffer for them', async (t) => {
  const budget = new BodyBudget(1024 * KIB);
  const h = await harness(budget);
  const holder = h.request('/holder', 1024 * KIB);
  holder.write(Buffer.alloc(16 * KIB));
  await serverStream(h, '/holder');
  const waiters = Array.from({ length: 40 }, (_, i) => {
    const stream = h.request(`/w${i}`, 512 * KIB);
    stream.write(Buffer.alloc(8 * KIB));
    return stream;
  });
  await waitFor('40 requests waiting', () => budget.waiting === 40 || undefined);

  const allocations = t.mock.method(Buffer, 'allocUnsafeSlow');
  const closed = [holder, ...waiters].map((s) => new Promise<number>((resolve) => s.on('close', () => resolve(s.rstCode ?? -1))));
  h.sweep(LIMITS.requestTimeoutMs + 1);
  const codes = await Promise.all(closed);
  assert.deepEqual(new Set(codes), new Set([http2.constants.NGHTTP2_CANCEL]), 'every request cancelled by the request timeout');
  await waitFor('every reservation released', () => (budget.inFlight === 0 && budget.waiting === 0) || undefined);
  assert.equal(h.dropped.length, 41);
  assert.equal(allocations.mock.callCount(), 0, 'no dropped request was admitted and given a body buffer');
  assert.equal(h.host.watched.size, 0);
});

test('a waiting stream whose client stops sending is dropped by the idle timeout and counted; one our flow control holds back is not', async () => {
  const budget = new BodyBudget(256 * KIB);
  const h = await harness(budget);
  const holder = h.request('/holder', 256 * KIB);
  holder.write(Buffer.alloc(16 * KIB));
  await serverStream(h, '/holder');
  // Stalled: one byte of a 100 KiB body, then nothing.
  const stalled = h.request('/stalled', 100 * KIB, true);
  stalled.write(Buffer.alloc(1));
  // Blocked: sends all it can of a 1 MiB body; our pause stops the stream's window from being refilled.
  const blocked = h.request('/blocked', 1024 * KIB, true);
  blocked.write(Buffer.alloc(1024 * KIB));
  await serverStream(h, '/stalled');
  const blockedStream = await serverStream(h, '/blocked');
  await waitFor('the blocked stream to use up its window', () => blockedStream.state.localWindowSize === 0 || undefined);
  assert.equal(budget.waiting, 2);
  h.sweep(0);

  // Past the idle timeout: the holder sent again meanwhile; the stalled one did not.
  const at = LIMITS.bodyIdleTimeoutMs + 500;
  h.host.clock = at;
  const holderReader = h.readers.get('/holder')!;
  const before = holderReader.bytes;
  holder.write(Buffer.alloc(1 * KIB));
  await waitFor('the holder\'s next bytes', () => holderReader.bytes > before || undefined);
  h.sweep(at);
  await waitFor('the stalled stream to be ended', () => stalled.closed || undefined, 5000);
  assert.equal(stalled.rstCode, http2.constants.NGHTTP2_CANCEL);
  assert.deepEqual(h.dropped, ['/stalled body idle timeout']);
  assert.deepEqual(h.failures, ['127.0.0.1'], 'the stalled client spent a failed-authentication token');
  assert.equal(blocked.closed, false, 'the stream held back by our flow control waits on');
  assert.equal(budget.waiting, 1);

  // Room frees: the blocked stream is admitted and read to its end.
  const answered = answer(blocked);
  blocked.end();
  holder.end(Buffer.alloc(256 * KIB - 17 * KIB));
  await answer(holder);
  assert.deepEqual(await answered, { status: 200, body: String(1024 * KIB) });
});

test('a body that ends while it waits is admitted at once (it is in memory anyway) and answered, though the budget is still held', async () => {
  const budget = new BodyBudget(256 * KIB);
  const h = await harness(budget);
  const holder = h.request('/holder', 256 * KIB);
  holder.write(Buffer.alloc(16 * KIB));
  await serverStream(h, '/holder');
  const whole = h.request('/whole', 40 * KIB, true);
  let answered: { status: number; body: string } | undefined;
  answer(whole).then((a) => (answered = a), () => {});
  whole.end(Buffer.alloc(40 * KIB));
  const wholeStream = await serverStream(h, '/whole');
  await waitFor('the whole body to have arrived', () => wholeStream.state.remoteClose === 1 || undefined);
  assert.equal(budget.waiting, 1);
  h.sweep(100);
  await waitFor('the answer', () => answered, 5000);
  assert.deepEqual(answered, { status: 200, body: String(40 * KIB) });
  assert.equal(holder.closed, false);
  assert.deepEqual(h.dropped, []);
});
