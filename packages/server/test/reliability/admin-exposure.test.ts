/**
 * The admin port: loopback by default; anywhere else only with an admin token, and then every
 * admin request needs `Authorization: Bearer <token>`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { BIN, startServer, tempDataDir } from '../helpers/server-process.js';

/** Local addresses (hex, as in /proc/net/tcp*) listening on `port`. */
function listeningAddresses(port: number): string[] {
  const out: string[] = [];
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length < 4 || cols[3] !== '0A') continue; // LISTEN
      const [addr, hexPort] = cols[1]!.split(':');
      if (parseInt(hexPort!, 16) === port) out.push(addr!);
    }
  }
  return out;
}

test('by default the admin port listens on 127.0.0.1 only', { timeout: 60_000 }, async () => {
  const server = await startServer({ dataDir: tempDataDir(), args: ['--workers', '1', '--no-worker'] });
  try {
    assert.deepEqual(listeningAddresses(server.adminPort), ['0100007F']);
    assert.equal((await fetch(`http://127.0.0.1:${server.adminPort}/healthz`)).status, 200);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

test('--admin-host 0.0.0.0 without ECAPI_ADMIN_TOKEN refuses to start with one clear error line', { timeout: 60_000 }, async () => {
  const env: Record<string, string | undefined> = { ...process.env };
  delete env.ECAPI_ADMIN_TOKEN;
  for (const workers of ['1', '2']) {
    const child = spawn(
      process.execPath,
      [BIN, '--data-dir', tempDataDir(), 'serve', '--port', '0', '--admin-port', '0', '--no-demo', '--admin-host', '0.0.0.0', '--workers', workers],
      { stdio: ['ignore', 'pipe', 'pipe'], env },
    );
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (t: string) => (stdout += t));
    child.stderr!.setEncoding('utf8').on('data', (t: string) => (stderr += t));
    const [code] = (await once(child, 'exit')) as [number | null];
    assert.notEqual(code, 0);
    assert.equal(stdout, '', 'nothing on stdout');
    const lines = stderr.split('\n').filter((l) => l.trim() !== '');
    assert.equal(lines.length, 1, `exactly one line on stderr: ${stderr}`);
    assert.match(lines[0]!, /^error: .*0\.0\.0\.0.*ECAPI_ADMIN_TOKEN/);
  }
});

test('with ECAPI_ADMIN_TOKEN, admin requests need the bearer token', { timeout: 60_000 }, async () => {
  const token = `adm-${Math.random().toString(36).slice(2)}-${Date.now()}`;
  const server = await startServer({
    dataDir: tempDataDir(),
    args: ['--admin-host', '0.0.0.0', '--workers', '1', '--no-worker'],
    extraEnv: { ECAPI_ADMIN_TOKEN: token },
  });
  try {
    assert.deepEqual(listeningAddresses(server.adminPort), ['00000000']);
    for (const path of ['/healthz', '/readyz', '/metrics', '/api/stats/demo']) {
      const url = `http://127.0.0.1:${server.adminPort}${path}`;
      for (const authorization of [undefined, 'Bearer wrong', `Bearer ${token}x`, token, `Basic ${token}`, 'Bearer ']) {
        const res = await fetch(url, authorization === undefined ? {} : { headers: { authorization } });
        assert.equal(res.status, 401, `${path} with ${authorization ?? 'no Authorization'}`);
        assert.deepEqual(await res.json(), { error: 'admin token required: send Authorization: Bearer <admin token>' });
      }
      const ok = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
      assert.equal(ok.status, 200, path);
    }
    assert.ok(!server.output().includes(token), 'the admin token is never logged');
  } finally {
    assert.equal(await server.stop(), 0);
  }
});
