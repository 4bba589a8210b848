/**
 * The PostgreSQL control plane against the reference behaviour of SqliteControlPlane: version
 * bumps, snapshot contents, rotation grace, revocation; secrets only ever stored sealed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { SecretBox } from '../../src/control/secret-box.js';
import { PostgresControlPlane } from '../../src/control/postgres-control-plane.js';
import { createPool, migrate } from '../../src/storage/postgres/database.js';
import { freshDatabase, pgOnly, queryDatabase } from '../helpers/postgres.js';

test('PostgresControlPlane: mutations bump the version; snapshot, grants, policy, rotation, revocation; no plaintext secret', pgOnly, async () => {
  const url = await freshDatabase('control');
  await migrate(url, 'production');
  assert.deepEqual((await migrate(url, 'production')).applied, [], 'migrate is idempotent');
  const pool = createPool(url, 'production');
  let now = 1_000_000;
  const cp = new PostgresControlPlane(pool, new SecretBox(randomBytes(32)), () => now);
  try {
    const v0 = await cp.version();
    await cp.createDataSet('a');
    await cp.createDataSet('b');
    await assert.rejects(cp.createDataSet('a'), /already exists/);
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
    await assert.rejects(cp.setPolicy('a', { mergeWindowMs: 1e300 }), /invalid merge window/);
    assert.equal(await cp.version(), v1);
    assert.equal(await cp.revealSecret(key.keyId), rotated.secret);
    const limited = await cp.setLimits('b', { rps: 5, burstRps: 10 });
    assert.equal(limited.limits.rps, 5);
    await assert.rejects(cp.setLimits('b', { burstRps: 1 }), /burst-rps must be at least rps/);
    now += 1;
    await cp.revokeKey(key.keyId);
    assert.equal((await cp.loadSnapshot()).keys.get(key.keyId)!.revoked, true);
    await assert.rejects(cp.rotateKey(key.keyId, 1000), /revoked/);
    await cp.removeGrant(key.keyId, 'b');
    assert.deepEqual((await cp.listKeys())[0]!.dataSets, ['a']);
    const dump = JSON.stringify(await queryDatabase(url, 'SELECT encode(secret_sealed, \'escape\') AS s, encode(previous_secret_sealed, \'escape\') AS p FROM signing_keys'));
    assert.ok(!dump.includes(key.secret) && !dump.includes(rotated.secret), 'no plaintext secret in signing_keys');
  } finally {
    await pool.end();
  }
});

test('PostgresControlPlane: a node with another master key is refused with one line', pgOnly, async () => {
  const url = await freshDatabase('control');
  await migrate(url, 'production');
  const pool = createPool(url, 'production');
  try {
    const right = new SecretBox(randomBytes(32));
    const first = new PostgresControlPlane(pool, right, Date.now, { name: 'PostgreSQL schema ecapi_production' });
    await first.createDataSet('a');
    await first.createKey(['a']);
    const other = new PostgresControlPlane(pool, new SecretBox(randomBytes(32)), Date.now, { name: 'PostgreSQL schema ecapi_production' });
    await assert.rejects(other.loadSnapshot(), /does not match the control plane \(PostgreSQL schema ecapi_production\)/);
    await assert.rejects(other.createKey(['a']), /does not match the control plane/);
    await new PostgresControlPlane(pool, right).verifyMasterKey();
  } finally {
    await pool.end();
  }
});
