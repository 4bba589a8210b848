import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SecretBox } from '../../src/control/secret-box.js';
import { SqliteControlPlane } from '../../src/control/sqlite-control-plane.js';
import { tempDataDir } from '../helpers/server-process.js';

test('secrets never appear in plain text in the control database files', async () => {
  const dir = tempDataDir();
  const cp = new SqliteControlPlane(join(dir, 'control.db'), new SecretBox(randomBytes(32)));
  await cp.createDataSet('ds');
  const issued = await cp.createKey(['ds']);
  const rotated = await cp.rotateKey(issued.keyId, 60_000);
  await cp.close();
  for (const file of readdirSync(dir)) {
    const bytes = readFileSync(join(dir, file)).toString('latin1');
    assert.ok(!bytes.includes(issued.secret), `${file} holds no plaintext secret`);
    assert.ok(!bytes.includes(rotated.secret), `${file} holds no plaintext rotated secret`);
  }
});

test('every mutation bumps the version; the snapshot carries grants, policy and both secrets while in grace', async () => {
  let now = 1_000_000;
  const cp = new SqliteControlPlane(join(tempDataDir(), 'control.db'), new SecretBox(randomBytes(32)), () => now);
  const v0 = await cp.version();
  await cp.createDataSet('a');
  await cp.createDataSet('b');
  const key = await cp.createKey(['a']);
  await cp.addGrant(key.keyId, 'b');
  await cp.setPolicy('a', { ip: 'truncate' });
  const rotated = await cp.rotateKey(key.keyId, 5000);
  assert.equal(rotated.previousSecretValidUntil, now + 5000);
  assert.equal(await cp.version(), v0 + 6);
  const snapshot = await cp.loadSnapshot();
  const active = snapshot.keys.get(key.keyId)!;
  assert.deepEqual([...active.dataSets].sort(), ['a', 'b']);
  assert.equal(active.previous?.validUntil, now + 5000);
  assert.equal(snapshot.dataSets.get('a')!.policy.ip, 'truncate');
  assert.equal(snapshot.dataSets.get('a')!.policy.version, 2);
  assert.equal(await cp.revealSecret(key.keyId), rotated.secret);
  // Out-of-range values are refused before the transaction: nothing changes, no version bump.
  const v1 = await cp.version();
  await assert.rejects(cp.rotateKey(key.keyId, 366 * 86_400_000), /invalid grace period: between 0s and 365d/);
  await assert.rejects(cp.rotateKey(key.keyId, Number.POSITIVE_INFINITY), /invalid grace period/);
  await assert.rejects(cp.setPolicy('a', { maxAgeSeconds: Number.POSITIVE_INFINITY }), /invalid max age/);
  assert.equal(await cp.version(), v1);
  assert.equal(await cp.revealSecret(key.keyId), rotated.secret);
  now += 1;
  await cp.revokeKey(key.keyId);
  assert.equal((await cp.loadSnapshot()).keys.get(key.keyId)!.revoked, true);
  await assert.rejects(cp.rotateKey(key.keyId, 1000), /revoked/);
  await cp.close();
});

test('the master key fingerprint: stored on first use, another key is refused, older files are checked by a sealed secret', async () => {
  const file = join(tempDataDir(), 'control.db');
  const right = new SecretBox(randomBytes(32));
  const cp = new SqliteControlPlane(file, right);
  await cp.createDataSet('a');
  const key = await cp.createKey(['a']);
  await cp.close();
  const Database = (await import('better-sqlite3')).default;
  const raw = new Database(file);
  const stored = (raw.prepare('SELECT master_key_fingerprint AS f FROM control_meta').get() as { f: string }).f;
  assert.equal(stored, right.fingerprint());

  const wrong = new SqliteControlPlane(file, new SecretBox(randomBytes(32)));
  await assert.rejects(wrong.loadSnapshot(), { name: 'SecretBoxError', message: /does not match the control plane .*control\.db/ });
  await assert.rejects(wrong.createKey(['a']), /does not match the control plane/);
  await assert.rejects(wrong.rotateKey(key.keyId, 1000), /does not match the control plane/);
  assert.equal((await wrong.listKeys()).length, 1, 'nothing was written with the wrong key');
  await wrong.close();

  // A file from before fingerprints: the first key that opens a sealed secret is recorded.
  raw.prepare('UPDATE control_meta SET master_key_fingerprint = NULL').run();
  const legacyWrong = new SqliteControlPlane(file, new SecretBox(randomBytes(32)));
  await assert.rejects(legacyWrong.verifyMasterKey(), /does not match the control plane/);
  await legacyWrong.close();
  const legacyRight = new SqliteControlPlane(file, right);
  await legacyRight.verifyMasterKey();
  assert.equal((await legacyRight.loadSnapshot()).keys.size, 1);
  await legacyRight.close();
  assert.equal((raw.prepare('SELECT master_key_fingerprint AS f FROM control_meta').get() as { f: string }).f, right.fingerprint());
  raw.close();
});
