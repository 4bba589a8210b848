/**
 * `serve` is up or down (issue 29, point 5): when the public or the admin port cannot be bound, the
 * real process exits 1 with one line naming the address, the port and the reason, and leaves
 * nothing behind (no serving process, no consumer, no worker of `--workers N`), in one process
 * and with `--workers 2` (the cluster primary and its node workers).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { once } from 'node:events';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { BIN, profileArgs, tempDataDir } from '../helpers/server-process.js';

async function holdPort(): Promise<{ server: Server; port: number }> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, port: (server.address() as AddressInfo).port };
}

/** Processes whose command line names this data dir (the serve process, its workers, its consumer), from /proc. */
function processesOf(dataDir: string): string[] {
  if (!existsSync('/proc/self/cmdline')) return [];
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    let cmdline = '';
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\u0000', ' ');
    } catch {
      continue; // gone meanwhile
    }
    if (cmdline.includes(dataDir)) found.push(`${pid} ${cmdline}`);
  }
  return found;
}

const cases = [
  { shape: 'one process', workers: '1', taken: 'public port' },
  { shape: 'one process', workers: '1', taken: 'admin port' },
  { shape: '--workers 2', workers: '2', taken: 'public port' },
  { shape: '--workers 2', workers: '2', taken: 'admin port' },
] as const;

for (const c of cases) {
  test(`serve (${c.shape}) with the ${c.taken} taken: exit 1, one line, nothing left running`, { timeout: 90_000 }, async () => {
    const held = await holdPort();
    try {
      const dataDir = tempDataDir('ecapi-ports-');
      const ports = c.taken === 'public port' ? ['--port', String(held.port), '--admin-port', '0'] : ['--port', '0', '--admin-port', String(held.port)];
      const child = spawn(process.execPath, [BIN, '--data-dir', dataDir, ...(await profileArgs(dataDir)), 'serve', ...ports, '--workers', c.workers], {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, ECAPI_LOG_LEVEL: 'info' },
      });
      let stdout = '';
      let stderr = '';
      child.stdout!.setEncoding('utf8').on('data', (t: string) => (stdout += t));
      child.stderr!.setEncoding('utf8').on('data', (t: string) => (stderr += t));
      // A guard, not a measurement: a process that stays up fails here instead of hanging the suite.
      const guard = setTimeout(() => child.kill('SIGKILL'), 60_000);
      const [code, signal] = (await once(child, 'exit')) as [number | null, string | null];
      clearTimeout(guard);
      assert.equal(signal, null, `the process exited by itself (it was killed after 60 s: it stayed up)\n${stderr}\n${stdout}`);
      assert.equal(code, 1, stderr);
      assert.equal(stderr, `error: cannot listen on 127.0.0.1:${held.port} (${c.taken}): address already in use (another process listens there: stop it or choose another port)\n`);
      assert.doesNotMatch(stdout, /ecapi-ingest listening/);
      assert.deepEqual(processesOf(dataDir), [], 'no worker or consumer process is left');
    } finally {
      held.server.close();
    }
  });
}
