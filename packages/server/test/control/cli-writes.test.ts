/**
 * Issue 16, point 6: a CLI write either happens completely or not at all. `key rotate --grace
 * 100000000d` used to commit the rotation and then fail to print it ("Invalid time value"): the new
 * secret was never shown, the old one stayed valid practically forever, and `key list` and the
 * console API answered 500 from then on. Now out-of-range durations are refused before anything is
 * written, and a listing never fails for a stored time outside the Date range (rows written
 * before the bound existed).
 *
 * Black-box through the CLI (in-process `main`) and the real server's admin API; runs on both
 * storage profiles (ECAPI_TEST_PROFILE=postgres with ECAPI_TEST_DATABASE_URL).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { cli, cliJson, databaseUrlFor, provision, startServer, tempDataDir } from '../helpers/server-process.js';
import { postSigned, sampleEvent } from '../helpers/https-client.js';
import { queryDatabase } from '../helpers/postgres.js';

interface KeyJson {
  key_id: string;
  rotated_at: string | null;
  previous_secret_valid_until: string | null;
  status: string;
}

const keyOf = async (dataDir: string, keyId: string) =>
  (await cliJson<KeyJson[]>(dataDir, ['key', 'list'])).find((k) => k.key_id === keyId)!;

test('key rotate with a grace past the bound fails with one line and writes nothing', async () => {
  const dataDir = tempDataDir('ecapi-cli-writes-');
  const creds = await provision(dataDir, ['rot']);
  for (const grace of ['100000000d', '366d', `${'9'.repeat(400)}d`]) {
    const result = await cli(dataDir, ['key', 'rotate', creds.keyId, '--grace', grace]);
    assert.equal(result.code, 1, `--grace ${grace}: exit code 1`);
    assert.equal(result.stdout, '', 'nothing printed on stdout');
    const lines = result.stderr.split('\n').filter((l) => l !== '');
    assert.equal(lines.length, 1, `one line on stderr: ${result.stderr}`);
    assert.match(lines[0]!, /^error: invalid duration ".*": the grace period is at most 365d$/);
    const key = await keyOf(dataDir, creds.keyId);
    assert.equal(key.rotated_at, null, `--grace ${grace}: the key was not rotated`);
    assert.equal(key.previous_secret_valid_until, null);
  }
  // The bound itself is accepted, and prints the new secret.
  const rotated = await cliJson<{ secret: string; previous_secret_valid_until: string }>(dataDir, ['key', 'rotate', creds.keyId, '--grace', '365d']);
  assert.match(rotated.secret, /^sk_/);
  const until = Date.parse(rotated.previous_secret_valid_until);
  assert.ok(Math.abs(until - (Date.now() + 365 * 86_400_000)) < 60_000, rotated.previous_secret_valid_until);
});

test('data-set policy refuses out-of-range windows without writing', async () => {
  const dataDir = tempDataDir('ecapi-cli-writes-');
  await provision(dataDir, ['pol']);
  const before = (await cliJson<{ id: string; policy: { version: number; max_age: string } }[]>(dataDir, ['data-set', 'list']))[0]!;
  for (const args of [['--max-age', `${'9'.repeat(400)}d`], ['--merge-window', '100000000d'], ['--max-age', '0s']]) {
    const result = await cli(dataDir, ['data-set', 'policy', 'pol', ...args]);
    assert.equal(result.code, 1, `${args.join(' ')}: exit code 1`);
    assert.equal(result.stderr.split('\n').filter((l) => l !== '').length, 1, result.stderr);
    assert.match(result.stderr, /^error: invalid (duration|max age)/);
  }
  const after = (await cliJson<{ id: string; policy: { version: number; max_age: string } }[]>(dataDir, ['data-set', 'list']))[0]!;
  assert.deepEqual(after, before, 'the policy did not change');
});

test('a stored grace past the Date range (written by an older version) does not break key list or the console API', { timeout: 60_000 }, async () => {
  const dataDir = tempDataDir('ecapi-cli-writes-');
  const creds = await provision(dataDir, ['legacy']);
  await cliJson(dataDir, ['key', 'rotate', creds.keyId, '--grace', '1h']);
  // What `key rotate --grace 100000000d` stored before the bound: now + 8.64e15 ms.
  const tooLate = Date.now() + 8_640_000_000_000_000;
  const url = await databaseUrlFor(dataDir);
  if (url) {
    await queryDatabase(url, 'UPDATE signing_keys SET previous_valid_until = $1 WHERE key_id = $2', [tooLate, creds.keyId]);
  } else {
    const Database = (await import('better-sqlite3')).default;
    const db = new Database(join(dataDir, 'production', 'control.db'));
    db.prepare('UPDATE signing_keys SET previous_valid_until = ? WHERE key_id = ?').run(tooLate, creds.keyId);
    db.close();
  }
  const listed = await cli(dataDir, ['--json', 'key', 'list']);
  assert.equal(listed.code, 0, listed.stderr);
  const key = (JSON.parse(listed.stdout) as KeyJson[]).find((k) => k.key_id === creds.keyId)!;
  assert.equal(key.previous_secret_valid_until, '+275760-09-13T00:00:00.000Z', 'shown as the last representable date');
  assert.equal((await cli(dataDir, ['key', 'list'])).code, 0, 'the text listing too');

  const server = await startServer({ dataDir, args: ['--workers', '1', '--no-worker'] });
  try {
    for (const path of ['/api/data-sets', '/api/data-sets/legacy']) {
      const res = await fetch(`http://127.0.0.1:${server.adminPort}${path}`);
      assert.equal(res.status, 200, path);
      const body = (await res.json()) as any;
      const row = path === '/api/data-sets' ? body.data_sets[0] : body;
      assert.equal(row.keys[0].previous_secret_valid_until, '+275760-09-13T00:00:00.000Z', path);
    }
    // The key still serves, and rotating it again with a valid grace repairs the row.
    const rotated = await cliJson<{ secret: string; previous_secret_valid_until: string }>(dataDir, ['key', 'rotate', creds.keyId, '--grace', '1s']);
    assert.ok(Date.parse(rotated.previous_secret_valid_until) < Date.now() + 10_000);
    const fresh = { keyId: creds.keyId, secret: rotated.secret };
    const started = Date.now();
    let status = 0;
    while (Date.now() - started < 5000) {
      status = (await postSigned(server.port, server.ca, fresh, 'legacy', JSON.stringify(sampleEvent('legacy')))).status;
      if (status === 200) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(status, 200);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});
