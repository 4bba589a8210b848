/**
 * A real `ecapi-ingest worker` started while its PostgreSQL server is down on a Unix socket
 * (postgres/database-unreachable.ts): PostgreSQL removes its socket file on a clean stop, and a
 * systemd unit or a proxy sidecar may not have made the socket directory yet, so the connect finds
 * no file. The worker waits it out, saying so with the error (view-worker.ts), keeps trying, and a
 * SIGTERM still stops it cleanly. No PostgreSQL server is needed: the worker never gets as far as
 * one. Every wait has a deadline, so a regression fails the test instead of hanging it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tempDataDir } from '../helpers/server-process.js';
import { waitFor } from '../helpers/fault-tools.js';
import { assertRunning, logLines, reap, spawnWorker, type WorkerProcess } from '../helpers/worker-process.js';

const RETRYING = 'the PostgreSQL database cannot be reached while the consumer starts; retrying';
const socketUrl = (dir: string) => `postgres://ecapi@${encodeURIComponent(dir)}:5432/ecapi`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const gone = (worker: WorkerProcess) => worker.child.exitCode !== null || worker.child.signalCode !== null;

test('worker: a PostgreSQL server down on its Unix socket (no socket file; no socket directory yet) is waited out, and SIGTERM still stops the worker', async () => {
  const socketDir = mkdtempSync(join(tmpdir(), 'ecapi-pgsock-'));
  const cases = [
    { what: 'no socket file in its directory', socketDir, dataDir: tempDataDir('ecapi-worker-outage-') },
    { what: 'no socket directory yet', socketDir: join(socketDir, 'not-made-yet'), dataDir: tempDataDir('ecapi-worker-outage-') },
  ];
  const workers = cases.map((c) => spawnWorker(['--data-dir', c.dataDir, 'worker', '--database-url', socketUrl(c.socketDir)], { ECAPI_LOG_LEVEL: 'info' }));
  try {
    for (const [i, worker] of workers.entries()) {
      const { what } = cases[i]!;
      await waitFor(`${what}: the worker saying it waits for the database`, () => logLines(worker, RETRYING).length > 0 || gone(worker), 30_000, 10);
      assertRunning(worker, what);
      const [line] = logLines(worker, RETRYING);
      assert.equal((line!.err as { code?: string }).code, 'ENOENT', what);
      assert.match(String((line!.err as { message?: string }).message), /\.s\.PGSQL\.5432/, `${what}: the warning names the socket`);
    }
    // Its next tries come 250 and 500 ms later: past them, a worker that gave up would be gone.
    await sleep(1000);
    for (const [i, worker] of workers.entries()) assertRunning(worker, `${cases[i]!.what}, a second later`);
    for (const worker of workers) worker.child.kill('SIGTERM');
    await waitFor('both workers to stop on SIGTERM', () => workers.every(gone), 30_000, 10);
    for (const [i, worker] of workers.entries()) {
      assert.equal(worker.child.exitCode, 0, `${cases[i]!.what}:\n${worker.log()}`);
      assert.equal(logLines(worker, 'consumer stopped').length, 1);
    }
  } finally {
    await reap(workers);
    rmSync(socketDir, { recursive: true, force: true });
    for (const c of cases) rmSync(c.dataDir, { recursive: true, force: true });
  }
});
