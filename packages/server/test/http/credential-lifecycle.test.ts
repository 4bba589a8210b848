/**
 * Black-box: credential changes made with the CLI reach a running server without a restart
 * (rotation with grace, revocation, grants), and the two environments are isolated.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { cli, cliJson, provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import { postSigned, sampleEvent } from '../helpers/https-client.js';

let dataDir: string;
let prod: ServerProcess;
let testEnv: ServerProcess;

before(async () => {
  dataDir = tempDataDir();
  await provision(dataDir, ['bootstrap']);
  await provision(dataDir, ['bootstrap'], 'test');
  prod = await startServer({ dataDir });
  testEnv = await startServer({ dataDir, env: 'test' });
});
after(async () => {
  await prod.stop();
  await testEnv.stop();
});

/** Polls `check` until it holds or `withinMs` passes; returns how long it took. */
async function eventually(check: () => Promise<boolean>, withinMs: number): Promise<number> {
  const started = Date.now();
  for (;;) {
    if (await check()) return Date.now() - started;
    if (Date.now() - started > withinMs) throw new Error(`condition not reached within ${withinMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const send = (server: ServerProcess, creds: { keyId: string; secret: string }, ds: string) =>
  postSigned(server.port, server.ca, creds, ds, JSON.stringify(sampleEvent(ds)));

test('a key created while the server runs works within seconds', async () => {
  const creds = await provision(dataDir, ['late-set']);
  await eventually(async () => (await send(prod, creds, 'late-set')).status === 200, 5000);
});

test('rotation: both secrets verify during the grace period, the old one fails after it', async () => {
  const creds = await provision(dataDir, ['rotating']);
  await eventually(async () => (await send(prod, creds, 'rotating')).status === 200, 5000);
  const rotated = await cliJson(dataDir, ['key', 'rotate', creds.keyId, '--grace', '3s']);
  assert.equal(rotated.key_id, creds.keyId);
  assert.notEqual(rotated.secret, creds.secret);
  assert.ok(Date.parse(rotated.previous_secret_valid_until) > Date.now());
  const fresh = { keyId: creds.keyId, secret: rotated.secret as string };
  await eventually(async () => (await send(prod, fresh, 'rotating')).status === 200, 5000);
  // Still inside the grace period: the previous secret verifies.
  assert.equal((await send(prod, creds, 'rotating')).status, 200);
  // After it: 401 with the rotated-secret message; the new secret keeps working.
  const waited = Date.parse(rotated.previous_secret_valid_until) - Date.now();
  if (waited > 0) await new Promise((r) => setTimeout(r, waited + 50));
  const old = await send(prod, creds, 'rotating');
  assert.equal(old.status, 401);
  assert.deepEqual(old.json(), { error: 'signature made with a rotated secret whose grace period has ended: sign with the current secret' });
  assert.equal((await send(prod, fresh, 'rotating')).status, 200);
});

test('revocation reaches the running server within 5 seconds', async () => {
  const creds = await provision(dataDir, ['revoking']);
  await eventually(async () => (await send(prod, creds, 'revoking')).status === 200, 5000);
  const revoked = await cliJson(dataDir, ['key', 'revoke', creds.keyId]);
  assert.equal(revoked.status, 'revoked');
  const tookMs = await eventually(async () => {
    const res = await send(prod, creds, 'revoking');
    return res.status === 401 && res.json().error === 'key id in X-Service-Key-Id has been revoked';
  }, 5000);
  assert.ok(tookMs <= 5000);
});

test('grant add and remove reach the running server', async () => {
  const creds = await provision(dataDir, ['granted-a']);
  await cliJson(dataDir, ['data-set', 'create', 'granted-b']);
  assert.equal((await send(prod, creds, 'granted-b')).status, 401);
  await cliJson(dataDir, ['grant', 'add', creds.keyId, 'granted-b']);
  await eventually(async () => (await send(prod, creds, 'granted-b')).status === 200, 5000);
  await cliJson(dataDir, ['grant', 'remove', creds.keyId, 'granted-b']);
  await eventually(async () => {
    const res = await send(prod, creds, 'granted-b');
    return res.status === 401 && res.json().error === 'principal not authorized for data_set_id granted-b';
  }, 5000);
});

test('test and production are isolated: each environment refuses the other one\'s key', async () => {
  const prodCreds = await provision(dataDir, ['iso']);
  const testCreds = await provision(dataDir, ['iso'], 'test');
  await eventually(async () => (await send(prod, prodCreds, 'iso')).status === 200, 5000);
  await eventually(async () => (await send(testEnv, testCreds, 'iso')).status === 200, 5000);
  const crossA = await send(testEnv, prodCreds, 'iso');
  assert.equal(crossA.status, 401);
  assert.deepEqual(crossA.json(), { error: 'unknown key id in X-Service-Key-Id' });
  const crossB = await send(prod, testCreds, 'iso');
  assert.equal(crossB.status, 401);
  // Separate queues: the test environment's export holds only test events.
  const testExport = await cli(dataDir, ['queue', 'export'], 'test');
  assert.ok(!testExport.stdout.includes(prodCreds.keyId));
  assert.ok(testExport.stdout.includes(testCreds.keyId));
});

test('CLI failures exit non-zero with one line on stderr', async () => {
  for (const args of [['key', 'revoke', 'key_nope'], ['data-set', 'create', 'bad id!'], ['grant', 'add', 'key_nope', 'iso'], ['key', 'rotate', 'key_nope']]) {
    const result = await cli(dataDir, args);
    assert.notEqual(result.code, 0, args.join(' '));
    assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr);
    assert.match(result.stderr, /^error: /);
  }
  const dup = await cli(dataDir, ['data-set', 'create', 'iso']);
  assert.equal(dup.code, 1);
  assert.equal(dup.stderr, 'error: data set iso already exists\n');
});
