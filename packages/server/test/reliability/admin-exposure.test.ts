/**
 * The admin port: loopback by default; anywhere else only with an admin token, and then every
 * admin request needs `Authorization: Bearer <token>`. Issue 16: the token must be strong, failed
 * authentications are throttled per client, and a foreign Host (DNS rebinding) is refused.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
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
  const token = `adm-${randomBytes(24).toString('hex')}`;
  const server = await startServer({
    dataDir: tempDataDir(),
    demo: true, // /api/stats/demo below: an unknown data set would be a 404
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
        assert.equal(res.headers.get('www-authenticate'), 'Bearer realm="ecapi-ingest admin"', 'a 401 carries its challenge (RFC 9110 15.5.2)');
      }
      const ok = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
      assert.equal(ok.status, 200, path);
    }
    assert.ok(!server.output().includes(token), 'the admin token is never logged');
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

/** One admin request with a chosen Host header (fetch does not let a caller set Host). */
function adminRequest(port: number, path: string, options: { host?: string; authorization?: string; method?: string; body?: string } = {}) {
  return new Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }>((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1', port, path, method: options.method ?? 'GET', agent: false,
        headers: {
          ...(options.host !== undefined ? { host: options.host } : {}),
          ...(options.authorization ? { authorization: options.authorization } : {}),
          ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (t: string) => (text += t));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text }));
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

test('a weak admin token refuses to start, on loopback too, with one error line that does not echo it', { timeout: 60_000 }, async () => {
  const cases: [string, string][] = [
    ['a', '0.0.0.0'],
    ['weak-but-visible-token', '127.0.0.1'],
    ['ab'.repeat(20), '127.0.0.1'],
  ];
  for (const [token, host] of cases) {
    const child = spawn(
      process.execPath,
      [BIN, '--data-dir', tempDataDir(), 'serve', '--port', '0', '--admin-port', '0', '--no-demo', '--admin-host', host, '--workers', '1', '--no-worker'],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ECAPI_ADMIN_TOKEN: token } },
    );
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (t: string) => (stdout += t));
    child.stderr!.setEncoding('utf8').on('data', (t: string) => (stderr += t));
    const [code] = (await once(child, 'exit')) as [number | null];
    assert.notEqual(code, 0, `token of ${token.length} characters on ${host}`);
    assert.equal(stdout, '');
    const lines = stderr.split('\n').filter((l) => l.trim() !== '');
    assert.equal(lines.length, 1, `exactly one line on stderr: ${stderr}`);
    assert.match(lines[0]!, /^error: the admin token \(ECAPI_ADMIN_TOKEN or --admin-token\) is too weak: .*openssl rand -hex 32/);
    if (token.length > 1) assert.ok(!stderr.includes(token), 'the token is not echoed');
  }
});

test('failed admin authentications are throttled per client: 429 with Retry-After, the token not even compared, then recovery', { timeout: 60_000 }, async () => {
  const token = `adm-${randomBytes(24).toString('hex')}`;
  const server = await startServer({ dataDir: tempDataDir(), args: ['--workers', '1', '--no-worker'], extraEnv: { ECAPI_ADMIN_TOKEN: token } });
  try {
    const url = `http://127.0.0.1:${server.adminPort}/api/data-sets`;
    // Requests without credentials are not guesses: never throttled.
    for (let i = 0; i < 20; i++) assert.equal((await fetch(url)).status, 401);
    // Wrong tokens: the first 10 are answered 401, then 429 with Retry-After.
    const statuses: number[] = [];
    let retryAfter = 0;
    for (let i = 0; i < 30; i++) {
      const res = await fetch(url, { headers: { authorization: `Bearer guess-${i}-${'x'.repeat(32)}` } });
      statuses.push(res.status);
      if (res.status === 429) {
        retryAfter = Number(res.headers.get('retry-after'));
        assert.match((await res.json() as { error: string }).error, /^too many failed admin authentications from this address/);
      } else await res.arrayBuffer();
    }
    assert.deepEqual(statuses.slice(0, 10), Array(10).fill(401), statuses.join(','));
    assert.ok(statuses.filter((s) => s === 401).length <= 11, `at most the burst (+1 refilled) got through: ${statuses.join(',')}`);
    assert.equal(statuses[statuses.length - 1], 429);
    assert.ok(retryAfter >= 1 && retryAfter <= 6, `Retry-After ${retryAfter}`);
    // While throttled, even the right token is not compared (a guesser learns nothing), nor is the console's login.
    assert.equal((await fetch(url, { headers: { authorization: `Bearer ${token}` } })).status, 429);
    const login = await fetch(`http://127.0.0.1:${server.adminPort}/api/session`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token }),
    });
    assert.equal(login.status, 429);
    assert.ok(Number(login.headers.get('retry-after')) >= 1);
    // GET /api/session never compares a bearer token (it would be an unthrottled oracle).
    const probe = await (await fetch(`http://127.0.0.1:${server.adminPort}/api/session`, { headers: { authorization: `Bearer ${token}` } })).json();
    assert.deepEqual(probe, { token_required: true, authenticated: false });
    // After Retry-After, the right token works again.
    await new Promise((r) => setTimeout(r, (Number(login.headers.get('retry-after')) + 0.2) * 1000));
    assert.equal((await fetch(url, { headers: { authorization: `Bearer ${token}` } })).status, 200);
    assert.ok(!server.output().includes(token), 'the admin token is never logged');
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

test('shared address: a guesser on the operator\'s address does not lock the operator out, and gets no more guesses', { timeout: 60_000 }, async () => {
  const token = `adm-${randomBytes(24).toString('hex')}`;
  const server = await startServer({ dataDir: tempDataDir(), args: ['--workers', '1', '--no-worker'], extraEnv: { ECAPI_ADMIN_TOKEN: token } });
  try {
    const base = `http://127.0.0.1:${server.adminPort}`;
    const url = `${base}/api/data-sets`;
    const bearer = (value: string) => ({ headers: { authorization: `Bearer ${value}` } });
    // The operator uses the token (a script) and logs in to the console, from 127.0.0.1.
    assert.equal((await fetch(url, bearer(token))).status, 200);
    const login = await fetch(`${base}/api/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token }) });
    assert.equal(login.status, 200);
    const cookie = login.headers.get('set-cookie')!.split(';')[0]!;
    // A guesser on the same address: 10 wrong tokens, then throttled.
    const statuses: number[] = [];
    for (let i = 0; i < 20; i++) statuses.push((await fetch(url, bearer(`guess-${i}-${'x'.repeat(32)}`))).status);
    assert.equal(statuses[statuses.length - 1], 429, statuses.join(','));
    assert.ok(statuses.filter((s) => s === 401).length <= 11, statuses.join(','));
    for (let i = 0; i < 5; i++) {
      // While the guesser keeps failing, the operator's token and console session are still served…
      assert.equal((await fetch(url, bearer(token))).status, 200, 'the correct token from a client that used it recently');
      assert.equal((await fetch(url, { headers: { cookie } })).status, 200, 'a valid console session');
      // …and the guesser's wrong tokens are all answered 429, as before.
      assert.equal((await fetch(url, bearer(`guess-again-${i}-${'y'.repeat(32)}`))).status, 429);
    }
    const relogin = await fetch(`${base}/api/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token }) });
    assert.equal(relogin.status, 200, 'the console login with the correct token');
    const wrongLogin = await fetch(`${base}/api/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: `z${token.slice(1)}` }) });
    assert.equal(wrongLogin.status, 429, 'a wrong login is throttled');
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

test('DNS rebinding: the admin port refuses a foreign Host with 421 before any route, answers IPs, localhost and allowed names', { timeout: 60_000 }, async () => {
  const dataDir = tempDataDir();
  const server = await startServer({
    dataDir, demo: true,
    args: ['--workers', '1', '--no-worker', '--admin-allowed-hosts', 'admin.internal, proxy.example:8080'],
  });
  try {
    const port = server.adminPort;
    // The attack of issue 16: a page on attacker.example rebound to 127.0.0.1 reads the data sets.
    for (const path of ['/api/data-sets', '/api/data-sets/demo', '/healthz', '/metrics', '/console/', '/no-such-route']) {
      for (const host of ['attacker.example', `attacker.example:${port}`, 'admin.internal.attacker.example', `proxy.example:${port}`, `localhost.attacker.example:${port}`]) {
        const res = await adminRequest(port, path, { host });
        assert.equal(res.status, 421, `${path} with Host: ${host}`);
        assert.equal(res.headers['content-type']?.startsWith('application/json'), true);
        assert.match(JSON.parse(res.text).error, /^misdirected request/);
        assert.ok(!res.text.includes('demo') && !res.text.includes('key_'), 'no data in the refusal');
      }
    }
    // No Host at all (HTTP/1.0 allows it): refused too.
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1', () => socket.end('GET /api/data-sets HTTP/1.0\r\n\r\n'));
      let text = '';
      socket.setEncoding('utf8').on('data', (t: string) => (text += t));
      socket.on('end', () => resolve(text));
      socket.on('error', reject);
    });
    assert.match(raw, /^HTTP\/1\.[01] 421 /);
    // Ours: IP literals, localhost, the allow list (with its port when it names one).
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, 'localhost', `[::1]:${port}`, `LOCALHOST.:${port}`, `admin.internal:${port}`, 'admin.internal', 'proxy.example:8080', `10.1.2.3:${port}`]) {
      const res = await adminRequest(port, '/api/data-sets', { host });
      assert.equal(res.status, 200, `Host: ${host}`);
      assert.ok(JSON.parse(res.text).data_sets.some((d: { id: string }) => d.id === 'demo'));
    }
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

test('a malformed --admin-allowed-hosts entry refuses to start with one line', { timeout: 60_000 }, async () => {
  const child = spawn(
    process.execPath,
    [BIN, '--data-dir', tempDataDir(), 'serve', '--port', '0', '--admin-port', '0', '--no-demo', '--workers', '1', '--no-worker', '--admin-allowed-hosts', 'ok.example,bad host:x'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (t: string) => (stderr += t));
  const [code] = (await once(child, 'exit')) as [number | null];
  assert.notEqual(code, 0);
  assert.match(stderr.trim(), /^error: invalid --admin-allowed-hosts entry "bad host:x"/);
});
