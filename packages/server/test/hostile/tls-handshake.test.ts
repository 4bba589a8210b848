/**
 * Issue 16, point 2: connections that never finish their TLS handshake. Node reads a TLS server's
 * handshakeTimeout only at construction; it used to be set afterwards, so silent sockets and
 * half-handshakes were held for Node's default 120 s. Here the timeout is 2 s (serve
 * --handshake-timeout 2s; default 10 s). The cap on connections mid-handshake (default 1024) is
 * tested on a second server with --max-pending-handshakes 50 and a 60 s handshake timeout, so that
 * whatever closes a silent socket there within the test is the cap, however slow the machine;
 * each of its drops is counted on /metrics, ecapi_untrusted_connections_closed_total{reason="handshake_cap"},
 * and only there (not also in ecapi_tls_handshake_failures_total). The handshake failures themselves
 * are counted in test/observability/defence-metrics.test.ts.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import { postSigned, sampleEvent, type Credentials } from '../helpers/https-client.js';
import { sleep } from '../helpers/raw-tls.js';
import { metricsText, metricValue, waitFor } from '../helpers/fault-tools.js';

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
  server = await startServer({ dataDir, args: ['--workers', '1', '--no-worker', '--headers-timeout', '2s', '--handshake-timeout', '2s'] });
});
after(async () => {
  assert.equal(await server.stop(), 0);
});

/** Opens a plain TCP connection, writes `bytes` (maybe none), and reports when the server closed it. */
async function tcp(bytes?: Buffer, port = server.port): Promise<{ socket: net.Socket; closed: Promise<number> }> {
  const socket = net.connect(port, '127.0.0.1');
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

async function assertStillServing(target: ServerProcess = server, credentials: Credentials = creds): Promise<void> {
  const res = await postSigned(target.port, target.ca, credentials, DS, JSON.stringify(sampleEvent(DS)));
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

});

describe(`at most ${MAX_PENDING} connections mid-handshake (issue 16, point 2)`, () => {
  let capped: ServerProcess;
  let cappedCreds: Credentials;
  before(async () => {
    const dataDir = tempDataDir();
    cappedCreds = await provision(dataDir, [DS]);
    capped = await startServer({ dataDir, args: ['--workers', '1', '--no-worker', '--handshake-timeout', '60s', '--max-pending-handshakes', String(MAX_PENDING)] });
  });
  after(async () => {
    assert.equal(await capped.stop(), 0);
  });

  test(`past ${MAX_PENDING} the oldest are dropped at once, and a real client still gets through`, { timeout: 60_000 }, async () => {
    const extra = 10;
    const opened: Awaited<ReturnType<typeof tcp>>[] = [];
    try {
      for (let i = 0; i < MAX_PENDING + extra; i++) opened.push(await tcp(i % 2 ? halfClientHello() : undefined, capped.port));
      // The handshake timeout is 60 s: whatever closed by now was dropped by the cap.
      await sleep(1000);
      const closed = (await Promise.all(opened.map(({ closed }) => Promise.race([closed, sleep(0).then(() => Infinity)]))))
        .map((ms, i) => (ms !== Infinity ? i : -1)).filter((i) => i >= 0);
      assert.ok(closed.length >= extra && closed.length <= extra + 2, `the ${extra} oldest dropped, got ${closed.length}: ${closed.join(',')}`);
      assert.ok(closed.every((i) => i < extra + 2), `the oldest ones are dropped: ${closed.join(',')}`);
      // A real handshake is the newest: it pushes out one more silent socket, and is served.
      await assertStillServing(capped, cappedCreds);
      // Every socket the cap dropped is counted, and nothing else (the handshake timeout is 60 s).
      const dropped = async () => (await Promise.all(opened.map(({ closed }) => Promise.race([closed, sleep(0).then(() => Infinity)])))).filter((ms) => ms !== Infinity).length;
      let seen = { dropped: 0, counted: Number.NaN };
      await waitFor('the drops counted on /metrics', async () => {
        seen = { dropped: await dropped(), counted: metricValue(await metricsText(capped.adminPort), 'ecapi_untrusted_connections_closed_total{reason="handshake_cap"}') };
        return (seen.dropped > extra && seen.counted === seen.dropped) || undefined;
      }).catch(() => assert.fail(`handshake_cap drops on /metrics: ${seen.counted}, sockets dropped: ${seen.dropped}`));
      // Counted once: a drop is not also a handshake failure (the TLS layer reports a dropped
      // half-handshake as a reset unless the drop says it is the cap's).
      const text = await metricsText(capped.adminPort);
      for (const reason of ['timeout', 'protocol', 'certificate', 'reset', 'plain_http', 'proxy_header', 'other']) {
        assert.equal(metricValue(text, `ecapi_tls_handshake_failures_total{reason="${reason}"}`), 0, `ecapi_tls_handshake_failures_total{reason="${reason}"}`);
      }
    } finally {
      for (const { socket } of opened) socket.destroy();
    }
  });
});
