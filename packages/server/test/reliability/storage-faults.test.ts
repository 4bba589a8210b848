/**
 * Storage faults: the data dir on a small tmpfs that fills up, twice: nearly full (commits fail
 * while the WAL grows, some requests still fit) and completely full. Requests get 500
 * `ingest backend unavailable`, never a hang and never a 200 for something not stored; readiness
 * turns false and the metrics show it; once space returns the service recovers by itself (its
 * probe), without a restart, and everything acknowledged before is still there, also after a
 * restart. Needs root with permission to mount (CI runs as root); skips otherwise.
 * (A queue locked by another process is covered by test/http/durability.test.ts.)
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, statfsSync, unlinkSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exportQueue, provision, startServer, type ServerProcess } from '../helpers/server-process.js';
import { postSigned, sampleEvent, type HttpResult } from '../helpers/https-client.js';
import { canMount, metricsText, metricValue, readyz, waitFor } from '../helpers/fault-tools.js';

const DS = 'tmpfs';
const mountDir = mkdtempSync(join(tmpdir(), 'ecapi-tmpfs-'));
const mountable = canMount(mountDir);
const skip = mountable ? false : 'mounting a tmpfs is not permitted here (needs root with CAP_SYS_ADMIN)';

let server: ServerProcess;
let creds: { keyId: string; secret: string };
const fillers: string[] = [];

before(async () => {
  if (!mountable) return;
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=24m', 'tmpfs', mountDir]);
  creds = await provision(mountDir, [DS]);
  server = await startServer({ dataDir: mountDir, args: ['--workers', '1', '--no-worker'] });
});

after(async () => {
  if (!mountable) return;
  if (server) await server.stop();
  try {
    execFileSync('umount', [mountDir]);
  } catch {
    execFileSync('umount', ['-l', mountDir]);
  }
  rmSync(mountDir, { recursive: true, force: true });
});

const freeBytes = () => {
  const s = statfsSync(mountDir);
  return s.bavail * s.bsize;
};

/** Fills the tmpfs until only `leave` bytes are free (0: completely full). */
function fill(leave: number): void {
  const file = join(mountDir, `filler-${fillers.length}`);
  fillers.push(file);
  const fd = openSync(file, 'w');
  try {
    for (const size of [1 << 20, 1 << 16, 4096]) {
      const chunk = Buffer.alloc(size, 0x61);
      for (;;) {
        if (freeBytes() - size < leave) break;
        try {
          writeSync(fd, chunk);
        } catch {
          break; // ENOSPC
        }
      }
    }
  } finally {
    closeSync(fd);
  }
}

function freeAll(): void {
  for (const file of fillers.splice(0)) unlinkSync(file);
}

/** An event of about `bytes` bytes (padding in ext) so that its commit must grow the WAL. */
function bigEvent(id: string, bytes: number) {
  return sampleEvent(DS, { id, ext: { pad: 'p'.repeat(bytes) } });
}

async function send(event: Record<string, unknown>): Promise<HttpResult> {
  // Never a hang: a generous bound far below anything a client would wait.
  return Promise.race([
    postSigned(server.port, server.ca, creds, DS, JSON.stringify(event)),
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error('request hung for 20 s')), 20_000)),
  ]);
}

const acknowledged = new Set<string>();
const refused = new Set<string>();

function record(res: HttpResult, id: string): void {
  if (res.status === 200) {
    assert.deepEqual(res.json(), { accepted: 1 });
    acknowledged.add(id);
  } else {
    assert.equal(res.status, 500, res.text);
    assert.deepEqual(res.json(), { error: 'ingest backend unavailable' });
    refused.add(id);
  }
}

async function assertRecovered(): Promise<void> {
  // No request is needed: the queue probes itself while unwritable.
  const ready = await waitFor('readiness to return', async () => ((await readyz(server.adminPort)).status === 200 ? true : undefined), 15_000);
  assert.equal(ready, true);
  assert.equal(metricValue(await metricsText(server.adminPort), 'ecapi_queue_writable'), 1);
}

async function assertAcknowledgedQueued(): Promise<Set<string>> {
  const ids = new Set((await exportQueue(mountDir)).map((r) => r.event.id as string));
  for (const id of acknowledged) assert.ok(ids.has(id), `acknowledged event ${id} is queued`);
  return ids;
}

test('nearly full: commits that need more WAL space answer 500, the rest 200, nothing acknowledged is lost', { skip, timeout: 120_000 }, async () => {
  // Warm up: the WAL and the databases exist and the server is ready.
  const first = `warm-${Date.now()}`;
  record(await send(sampleEvent(DS, { id: first })), first);
  fill(256 * 1024);
  // Concurrent requests of ~64 KiB: group commits that grow the WAL into the last free pages.
  const ids = Array.from({ length: 24 }, (_, i) => `near-${i}`);
  const results = await Promise.all(ids.map((id) => send(bigEvent(id, 64 * 1024))));
  results.forEach((res, i) => record(res, ids[i]!));
  assert.ok(refused.size > 0, 'some commits failed for lack of space');
  const metrics = await metricsText(server.adminPort);
  assert.ok(metricValue(metrics, 'ecapi_queue_commit_failures_total') >= 1, 'commit failures are counted');
  freeAll();
  await assertRecovered();
  const queued = await assertAcknowledgedQueued();
  for (const id of refused) assert.ok(!queued.has(id), `a 500 event (${id}) is not queued`);
});

test('completely full: 500 every time, readiness false, metrics show it, one error line; recovery without a restart', { skip, timeout: 120_000 }, async () => {
  refused.clear();
  // Lines of the previous test still in the log buffer (flushed every 200 ms) are not this test's.
  await new Promise((r) => setTimeout(r, 400));
  const logFrom = server.output().length;
  fill(0);
  const ids = Array.from({ length: 8 }, (_, i) => `full-${i}`);
  for (const id of ids) record(await send(bigEvent(id, 128 * 1024)), id);
  assert.ok(refused.size > 0, 'at least one request was refused');
  const down = await readyz(server.adminPort);
  assert.equal(down.status, 503);
  assert.equal(down.body.ready, false);
  assert.equal(down.body.checks.queue_writable, false);
  assert.match(String(down.body.checks.queue_error), /full|disk|no space|I\/O/i);
  const metrics = await metricsText(server.adminPort);
  assert.equal(metricValue(metrics, 'ecapi_queue_writable'), 0);
  assert.ok(metricValue(metrics, 'ecapi_queue_commit_failures_total') >= 2);
  // Still refusing while full: the probe does not turn readiness true on its own.
  await new Promise((r) => setTimeout(r, 1200));
  assert.equal((await readyz(server.adminPort)).status, 503);

  freeAll();
  await assertRecovered();
  // The retries the spec allows now succeed.
  for (const id of refused) record(await send(bigEvent(id, 128 * 1024)), id);
  const queued = await assertAcknowledgedQueued();
  for (const id of ids) assert.ok(queued.has(id));

  // The log (issue 16, point 9): the storage failure once at error level, its recovery once;
  // the 500s themselves stay info-level request lines. Flushed within 200 ms.
  await new Promise((r) => setTimeout(r, 400));
  const logged = server.output().slice(logFrom).split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { level: number; msg: string; queue_error?: string });
  const errors = logged.filter((l) => l.level >= 50);
  assert.equal(errors.length, 1, `one error line for ${refused.size} refused requests: ${JSON.stringify(errors)}`);
  assert.match(errors[0]!.msg, /^queue storage failing/);
  assert.match(String(errors[0]!.queue_error), /full|disk|no space|I\/O/i);
  assert.equal(logged.filter((l) => l.msg === 'queue storage recovered').length, 1);
});

test('everything acknowledged survives a restart after the faults', { skip, timeout: 60_000 }, async () => {
  assert.equal(await server.stop(), 0);
  server = await startServer({ dataDir: mountDir, args: ['--workers', '1', '--no-worker'] });
  const queued = await assertAcknowledgedQueued();
  assert.ok(queued.size >= acknowledged.size);
  const after = `after-restart-${Date.now()}`;
  record(await send(sampleEvent(DS, { id: after })), after);
});
