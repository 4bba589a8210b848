/**
 * A real `ecapi-ingest worker` started while its PostgreSQL server is down on a Unix socket
 * (postgres/database-unreachable.ts): PostgreSQL removes its socket file when it stops, so the
 * connect finds no file in a socket directory that exists. The worker waits it out, saying so
 * (view-worker.ts), and a SIGTERM still stops it cleanly; a socket directory that does not exist is
 * a wrong `host`, and the worker exits at once with the error. No PostgreSQL server is needed: the
 * worker never gets as far as one.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tempDataDir } from '../helpers/server-process.js';
import { logLines, reap, spawnWorker } from '../helpers/worker-process.js';

const RETRYING = 'the PostgreSQL database cannot be reached while the consumer starts; retrying';
const socketUrl = (dir: string) => `postgres://ecapi@${encodeURIComponent(dir)}:5432/ecapi`;

async function until(what: string, check: () => boolean): Promise<void> {
  for (let i = 0; i < 3000; i++) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.fail(`gave up waiting: ${what}`);
}

test('worker: a server down on its Unix socket is waited out (and SIGTERM still stops it); a socket directory that does not exist exits with the error', async () => {
  const socketDir = mkdtempSync(join(tmpdir(), 'ecapi-pgsock-'));
  const dataDir = tempDataDir('ecapi-worker-outage-');
  const otherDataDir = tempDataDir('ecapi-worker-wrong-host-');
  const down = spawnWorker(['--data-dir', dataDir, 'worker', '--database-url', socketUrl(socketDir)], { ECAPI_LOG_LEVEL: 'info' });
  const wrongHost = spawnWorker(['--data-dir', otherDataDir, 'worker', '--database-url', socketUrl(join(socketDir, 'no-such-dir'))], {
    ECAPI_LOG_LEVEL: 'info',
  });
  try {
    await wrongHost.exited;
    assert.equal(wrongHost.child.exitCode, 1, wrongHost.log());
    assert.match(wrongHost.log(), /error: connect ENOENT .*no-such-dir\/\.s\.PGSQL\.5432/);
    assert.deepEqual(logLines(wrongHost, RETRYING), [], 'a wrong host is not waited out');

    await until('the worker says it waits for the database', () => logLines(down, RETRYING).length > 0 || down.child.exitCode !== null);
    assert.equal(down.child.exitCode, null, `the worker exited instead of waiting:\n${down.log()}`);
    const [line] = logLines(down, RETRYING);
    assert.equal((line!.err as { code?: string }).code, 'ENOENT');
    down.child.kill('SIGTERM');
    await down.exited;
    assert.equal(down.child.exitCode, 0, down.log());
    assert.equal(logLines(down, 'consumer stopped').length, 1);
  } finally {
    await reap([down, wrongHost]);
    rmSync(socketDir, { recursive: true, force: true });
    for (const dir of [dataDir, otherDataDir]) rmSync(dir, { recursive: true, force: true });
  }
});
