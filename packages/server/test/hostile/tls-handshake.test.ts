/**
 * Issue 16, point 2: connections that never finish their TLS handshake. Node reads a TLS server's
 * handshakeTimeout only at construction; it used to be set afterwards, so silent sockets and
 * half-handshakes were held for Node's default 120 s. Here the timeout is 2 s (serve
 * --handshake-timeout 2s; default 10 s), and at most 50 connections may be mid-handshake
 * (--max-pending-handshakes 50; default 1024): past that the oldest is dropped.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import { postSigned, sampleEvent, type Credentials } from '../helpers/https-client.js';
import { sleep } from '../helpers/raw-tls.js';

const DS = 'handshake';
const HANDSHAKE_TIMEOUT_MS = 2000;
const MAX_PENDING = 50;
/** How long a test waits for a close before it calls the connection held (Node's default would be 120 s). */
const GIVE_UP_MS = 15_000;
let server: ServerProcess;
let creds: Credentials;

before(async () => {
  const dataDir = tempDataDir();
  creds = await provision(dataDir, [DS]);
  server = await startServer({
    dataDir,
    args: ['--workers', '1', '--no-worker', '--headers-timeout', '2s', '--handshake-timeout', '2s', '--max-pending-handshakes', String(MAX_PENDING)],
  });
});
after(async () => {
  assert.equal(await server.stop(), 0);
});

/** Opens a plain TCP connection, writes `bytes` (maybe none), and reports when the server closed it. */
async function tcp(bytes?: Buffer): Promise<{ socket: net.Socket; closed: Promise<number> }> {
  const socket = net.connect(server.port, '127.0.0.1');
  socket.on('error', () => {});
  socket.on('data', () => {});
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  const opened = performance.now();
  if (bytes) socket.write(bytes);
  const closed = new Promise<number>((resolve) => {
    const timer = setTimeout(() => resolve(Infinity), GIVE_UP_MS);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(performance.now() - opened);
    });
  });
  return { socket, closed };
}

/** The start of a TLS 1.3 ClientHello: a handshake record header promising 512 bytes, and 40 of them. */
function halfClientHello(): Buffer {
  const record = Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00]);
  const hello = Buffer.concat([Buffer.from([0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]), Buffer.alloc(34, 0x2a)]);
  return Buffer.concat([record, hello]);
}

async function assertStillServing(): Promise<void> {
  const res = await postSigned(server.port, server.ca, creds, DS, JSON.stringify(sampleEvent(DS)));
  assert.equal(res.status, 200);
}

describe('TLS handshake bounds (issue 16, point 2)', () => {
  test('a TCP connection that sends nothing is closed by the handshake timeout', { timeout: 30_000 }, async () => {
    const { socket, closed } = await tcp();
    const afterMs = await closed;
    socket.destroy();
    assert.ok(afterMs !== Infinity, `still open after ${GIVE_UP_MS} ms`);
    assert.ok(afterMs >= HANDSHAKE_TIMEOUT_MS - 500, `closed by the timeout, not before (${Math.round(afterMs)} ms)`);
    assert.ok(afterMs < HANDSHAKE_TIMEOUT_MS + 3000, `closed after ${Math.round(afterMs)} ms`);
  });

  test('a half-sent ClientHello is closed by the handshake timeout', { timeout: 30_000 }, async () => {
    const { socket, closed } = await tcp(halfClientHello());
    const afterMs = await closed;
    socket.destroy();
    assert.ok(afterMs !== Infinity, `still open after ${GIVE_UP_MS} ms`);
    assert.ok(afterMs >= HANDSHAKE_TIMEOUT_MS - 500, `closed by the timeout, not before (${Math.round(afterMs)} ms)`);
    assert.ok(afterMs < HANDSHAKE_TIMEOUT_MS + 3000, `closed after ${Math.round(afterMs)} ms`);
  });

  test(`past ${MAX_PENDING} connections mid-handshake the oldest are dropped at once, and real clients still get through`, { timeout: 30_000 }, async () => {
    const extra = 10;
    const opened: Awaited<ReturnType<typeof tcp>>[] = [];
    try {
      for (let i = 0; i < MAX_PENDING + extra; i++) opened.push(await tcp(i % 2 ? halfClientHello() : undefined));
      // Well inside the handshake timeout: only eviction can have closed any of them yet.
      const early = await Promise.all(opened.map(({ closed }) => Promise.race([closed, sleep(600).then(() => Infinity)])));
      const closedEarly = early.map((ms, i) => (ms < HANDSHAKE_TIMEOUT_MS - 500 ? i : -1)).filter((i) => i >= 0);
      assert.ok(closedEarly.length >= extra, `at least the ${extra} oldest dropped early, got ${closedEarly.length}: ${closedEarly.join(',')}`);
      assert.ok(closedEarly.every((i) => i < extra + 5), `the oldest ones are dropped: ${closedEarly.join(',')}`);
      await assertStillServing();
    } finally {
      for (const { socket } of opened) socket.destroy();
    }
  });
});
