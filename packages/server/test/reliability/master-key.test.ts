/**
 * The master key in recovery (issue 21) and private files (issue 16, point 5), black-box: the real
 * binary, started by bash with `umask 022` as an operator's shell would.
 *
 * - Everything the service creates in the data dir (databases with their -wal and -shm, the body
 *   log, the key, TLS files, directories) is 0600/0700 while serve runs and after it stopped.
 * - A wrong, emptied or missing master key stops `serve` and every command that seals or opens a
 *   secret with ONE line on stderr naming the file or variable read, saying it does not match the
 *   control plane and what to do; a missing key is never replaced by a new one.
 * - `queue export` needs no master key: the events stay reachable whatever happened to the key.
 * - --master-key-file / ECAPI_MASTER_KEY_FILE: the key from a mounted secret; the service then
 *   authenticates the keys issued before.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { copyFileSync, existsSync, readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { BIN, TEST_PROFILE, tempDataDir } from '../helpers/server-process.js';
import { postSigned, sampleEvent } from '../helpers/https-client.js';
import { listTree } from '../helpers/strace-durability.js';

const skip = TEST_PROFILE === 'postgres' ? 'the embedded profile\'s files' : false;
const baseEnv = { ...process.env, ECAPI_MASTER_KEY: '', ECAPI_MASTER_KEY_FILE: '', ECAPI_DATABASE_URL: '', ECAPI_LOG_LEVEL: 'warn' };
/** Runs the binary from a shell with the umask most operators have. */
const UMASK_022 = 'umask 022 && exec "$0" "$@"';

function run(dataDir: string, args: string[], env: Record<string, string> = {}) {
  const result = spawnSync('bash', ['-c', UMASK_022, process.execPath, BIN, '--data-dir', dataDir, ...args], {
    encoding: 'utf8',
    env: { ...baseEnv, ...env },
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

async function serve(dataDir: string, env: Record<string, string> = {}, args: string[] = []) {
  const child = spawn('bash', ['-c', UMASK_022, process.execPath, BIN, '--data-dir', dataDir, 'serve', '--port', '0', '--admin-port', '0', '--no-demo', '--workers', '1', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...baseEnv, ECAPI_LOG_LEVEL: 'info', ...env },
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (t: string) => (stdout += t));
  child.stderr!.setEncoding('utf8').on('data', (t: string) => (stderr += t));
  const exited = once(child, 'exit') as Promise<[number | null]>;
  const started = await Promise.race([
    exited.then(([code]) => ({ code })),
    new Promise<{ port: number }>((resolve) => {
      const onData = () => {
        const line = stdout.split('\n').find((l) => l.includes('"ecapi-ingest listening"'));
        if (line) resolve({ port: (JSON.parse(line) as { port: number }).port });
      };
      child.stdout!.on('data', onData);
    }),
  ]);
  return {
    started,
    stderr: () => stderr,
    ca: () => readFileSync(join(dataDir, 'tls', 'localhost-cert.pem'), 'utf8'),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return (await exited)[0];
    },
  };
}

function assertPrivate(dataDir: string, when: string) {
  const wrong = [...listTree(dataDir)]
    .map(([path, type]) => ({ path, type, mode: statSync(path).mode & 0o777 }))
    .filter((e) => e.mode !== (e.type === 'dir' ? 0o700 : 0o600))
    .map((e) => `${e.path.replace(dataDir, '<data>')} ${e.type} ${e.mode.toString(8)}`);
  assert.deepEqual(wrong, [], `${when}: every entry of the data dir is 0600 (files) or 0700 (directories)`);
}

function assertOneLineError(result: { code: number | null; stderr: string }, pattern: RegExp, what: string) {
  assert.equal(result.code, 1, `${what}: exit code 1 (${result.stderr})`);
  const lines = result.stderr.trimEnd().split('\n');
  assert.equal(lines.length, 1, `${what}: exactly one line on stderr:\n${result.stderr}`);
  assert.match(lines[0]!, pattern, what);
}

test('with umask 022, everything the CLI and serve create in the data dir is 0600/0700', { skip, timeout: 120_000 }, async () => {
  const dataDir = join(tempDataDir('ecapi-modes-'), 'data');
  assert.equal(run(dataDir, ['data-set', 'create', 'modes']).code, 0);
  const key = JSON.parse(run(dataDir, ['--json', 'key', 'create', '--data-set', 'modes']).stdout) as { key_id: string; secret: string };
  assertPrivate(dataDir, 'after key create');
  // serve with the consumer (view.db's WAL) until a single event and a batch for the body log are in.
  const server = await serve(dataDir, {}, []);
  try {
    assert.ok('port' in server.started, server.stderr());
    const port = (server.started as { port: number }).port;
    const credentials = { keyId: key.key_id, secret: key.secret };
    assert.equal((await postSigned(port, server.ca(), credentials, 'modes', JSON.stringify(sampleEvent('modes')))).status, 200);
    const batch = { events: Array.from({ length: 100 }, () => sampleEvent('modes', { properties: { note: 'n'.repeat(400) } })) };
    assert.equal((await postSigned(port, server.ca(), credentials, 'modes', JSON.stringify(batch))).status, 200);
    assert.ok(existsSync(join(dataDir, 'production', 'queue.db-bodies')), 'the body log was created');
    assert.ok(existsSync(join(dataDir, 'production', 'queue.db-wal')) && existsSync(join(dataDir, 'production', 'queue.db-shm')));
    assertPrivate(dataDir, 'while serve runs');
  } finally {
    assert.equal(await server.stop(), 0);
  }
  assert.equal(run(dataDir, ['--env', 'test', 'data-set', 'create', 'other']).code, 0);
  assertPrivate(dataDir, 'after serve stopped and another environment was created');
});

test('a wrong, emptied or missing master key: one line from serve and the CLI, never a new key; queue export still works', { skip, timeout: 120_000 }, async () => {
  const dataDir = join(tempDataDir('ecapi-masterkey-'), 'data');
  const keyFile = join(dataDir, 'master.key');
  assert.equal(run(dataDir, ['data-set', 'create', 'mk']).code, 0);
  const key = JSON.parse(run(dataDir, ['--json', 'key', 'create', '--data-set', 'mk']).stdout) as { key_id: string; secret: string };
  const backup = join(dataDir, '..', 'master.key.backup');
  copyFileSync(keyFile, backup);
  // An event in the queue, accepted with the right key.
  {
    const server = await serve(dataDir);
    try {
      assert.ok('port' in server.started, server.stderr());
      const answer = await postSigned((server.started as { port: number }).port, server.ca(), { keyId: key.key_id, secret: key.secret }, 'mk', JSON.stringify(sampleEvent('mk', { id: 'kept' })));
      assert.equal(answer.status, 200);
    } finally {
      assert.equal(await server.stop(), 0);
    }
  }
  const what = /restore master\.key from your backup, or set ECAPI_MASTER_KEY/;

  // 1. Another key in master.key (a regenerated one).
  writeFileSync(keyFile, randomBytes(32).toString('base64') + '\n');
  const wrong = new RegExp(`^error: master key file ${keyFile.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} does not match the control plane \\(.*control\\.db\\).*${what.source}`);
  assertOneLineError(run(dataDir, ['key', 'rotate', key.key_id]), wrong, 'key rotate with a wrong key');
  assertOneLineError(run(dataDir, ['key', 'create', '--data-set', 'mk']), wrong, 'key create with a wrong key');
  let server = await serve(dataDir);
  assert.ok(!('port' in server.started), 'serve does not start with a wrong key');
  assertOneLineError({ code: await server.stop(), stderr: server.stderr() }, wrong, 'serve with a wrong key');
  // The events are still reachable: queue export does not unseal anything.
  const exported = run(dataDir, ['queue', 'export']);
  assert.equal(exported.code, 0, exported.stderr);
  assert.equal((JSON.parse(exported.stdout.trim()) as { event: { id: string } }).event.id, 'kept');

  // 2. Emptied by a power failure (the old code's failure mode).
  writeFileSync(keyFile, '');
  const empty = /^error: master key file .*master\.key is empty, so it does not match the control plane: restore master\.key from your backup, or set ECAPI_MASTER_KEY/;
  assertOneLineError(run(dataDir, ['key', 'rotate', key.key_id]), empty, 'key rotate with an empty key file');
  server = await serve(dataDir);
  assert.ok(!('port' in server.started));
  assertOneLineError({ code: await server.stop(), stderr: server.stderr() }, empty, 'serve with an empty key file');
  writeFileSync(keyFile, 'c2hvcnQ=\n'); // base64 of 5 bytes
  assertOneLineError(run(dataDir, ['key', 'rotate', key.key_id]), /^error: master key file .*master\.key does not hold a master key .*does not match the control plane/, 'a short key');

  // 3. Lost: never replaced by a new key while secrets are sealed.
  unlinkSync(keyFile);
  const missing = /^error: master key file .*master\.key does not exist, but the control plane holds secrets sealed with a master key.*restore master\.key from your backup/;
  assertOneLineError(run(dataDir, ['key', 'create', '--data-set', 'mk']), missing, 'key create without the key file');
  server = await serve(dataDir);
  assert.ok(!('port' in server.started));
  assertOneLineError({ code: await server.stop(), stderr: server.stderr() }, missing, 'serve without the key file');
  assert.equal(existsSync(keyFile), false, 'no new master key was generated');
  // ... also not through the other environment, which shares the key file.
  assert.equal(run(dataDir, ['--env', 'test', 'data-set', 'create', 'x']).code, 0, 'data sets need no key');
  assertOneLineError(run(dataDir, ['--env', 'test', 'key', 'create', '--data-set', 'x']), missing, 'the test environment does not create a new key either');
  assert.equal(existsSync(keyFile), false);

  // 4. ECAPI_MASTER_KEY set to another key: the message names the variable.
  assertOneLineError(
    run(dataDir, ['key', 'rotate', key.key_id], { ECAPI_MASTER_KEY: randomBytes(32).toString('hex') }),
    /^error: ECAPI_MASTER_KEY does not match the control plane/,
    'a wrong ECAPI_MASTER_KEY',
  );

  // 5. The way back: the backup as a mounted secret (--master-key-file / ECAPI_MASTER_KEY_FILE),
  //    then restored in place. The key issued before authenticates again; nothing was lost.
  assert.equal(run(dataDir, ['--master-key-file', backup, 'key', 'list']).code, 0);
  const envs: Record<string, string>[] = [{ ECAPI_MASTER_KEY_FILE: backup }, {}];
  for (const env of envs) {
    if (!('ECAPI_MASTER_KEY_FILE' in env)) copyFileSync(backup, keyFile);
    const server = await serve(dataDir, env);
    try {
      assert.ok('port' in server.started, server.stderr());
      const answer = await postSigned((server.started as { port: number }).port, server.ca(), { keyId: key.key_id, secret: key.secret }, 'mk', JSON.stringify(sampleEvent('mk')));
      assert.equal(answer.status, 200, answer.text);
    } finally {
      assert.equal(await server.stop(), 0);
    }
  }
  const ids = run(dataDir, ['queue', 'export']).stdout.trim().split('\n').map((l) => (JSON.parse(l) as { event: { id: string } }).event.id);
  assert.equal(ids.length, 3);
  assert.equal(ids[0], 'kept');
});
