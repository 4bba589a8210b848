/**
 * The ControlPlane contract, written once and run against every backend (SQLite in `npm test`,
 * PostgreSQL in `.ci/run` when ECAPI_TEST_DATABASE_URL is set): version bumps on every mutation
 * and none on a refused one, snapshot contents, grants, policy and limits, rotation grace,
 * revocation, the master-key fingerprint, legacy policy rows, and secrets stored only sealed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { ControlPlane } from '../../src/control/control-plane.js';
import { SecretBox } from '../../src/control/secret-box.js';
import { MergeWindows } from '../../src/consumer/merge-windows.js';

/** One empty control plane store, and raw access to its rows for what the API cannot show. */
export interface ControlPlaneHarness {
  /** A control plane over this store with the given master key and clock. */
  open(keys: SecretBox, now?: () => number): ControlPlane;
  /** Every stored byte of the signing keys table, as text (to search for plaintext secrets). */
  dumpSigningKeys(): Promise<string>;
  storedFingerprint(): Promise<string | null>;
  /** Makes the store look like one from before master-key fingerprints. */
  clearFingerprint(): Promise<void>;
  /** Writes a data set's policy column as given (a row written by an older version). */
  writePolicyRow(dataSetId: string, json: string): Promise<void>;
  /** The name the master-key messages give this store. */
  readonly name: RegExp;
  dispose(): Promise<void>;
}

export interface ControlPlaneFactory {
  create(): Promise<ControlPlaneHarness>;
}

export function controlPlaneContract(backend: string, factory: ControlPlaneFactory, options: { skip?: string | false } = {}): void {
  const run = (name: string, fn: (h: ControlPlaneHarness) => Promise<void>) =>
    test(`${backend} control plane: ${name}`, { skip: options.skip ?? false }, async () => {
      const harness = await factory.create();
      try {
        await fn(harness);
      } finally {
        await harness.dispose();
      }
    });

  run('every mutation bumps the version; the snapshot carries grants, policy and both secrets while in grace', async (h) => {
    let now = 1_000_000;
    const cp = h.open(new SecretBox(randomBytes(32)), () => now);
    const v0 = await cp.version();
    await cp.createDataSet('a');
    await cp.createDataSet('b');
    await assert.rejects(cp.createDataSet('a'), /data set a already exists/);
    await assert.rejects(cp.createDataSet('-bad'), /invalid data set id "-bad"/);
    const key = await cp.createKey(['a']);
    await cp.addGrant(key.keyId, 'b');
    await cp.addGrant(key.keyId, 'b'); // already granted: no change, no bump
    await cp.setPolicy('a', { ip: 'truncate' });
    const rotated = await cp.rotateKey(key.keyId, 5000);
    assert.equal(rotated.previousSecretValidUntil, now + 5000);
    assert.equal(await cp.version(), v0 + 6);
    const snapshot = await cp.loadSnapshot();
    assert.equal(snapshot.version, v0 + 6);
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
    await assert.rejects(cp.setPolicy('a', { mergeWindowMs: 1e300 }), /invalid merge window/);
    await assert.rejects(cp.setPolicy('nosuch', { ip: 'drop' }), /data set nosuch does not exist/);
    await assert.rejects(cp.createKey([]), /at least one data set/);
    await assert.rejects(cp.createKey(['a', 'nosuch']), /data set nosuch does not exist/);
    assert.equal(await cp.version(), v1);
    assert.equal((await cp.listKeys()).length, 1, 'a refused key left nothing behind');
    assert.equal(await cp.revealSecret(key.keyId), rotated.secret);
    now += 1;
    const revoked = await cp.revokeKey(key.keyId);
    assert.equal(revoked.revokedAt, now);
    assert.equal((await cp.revokeKey(key.keyId)).revokedAt, now, 'revoking twice keeps the first time');
    assert.equal((await cp.loadSnapshot()).keys.get(key.keyId)!.revoked, true);
    await assert.rejects(cp.rotateKey(key.keyId, 1000), /revoked/);
    await cp.removeGrant(key.keyId, 'b');
    await assert.rejects(cp.removeGrant(key.keyId, 'b'), /has no grant for data set b/);
    await assert.rejects(cp.revokeKey('key_nosuch'), /key key_nosuch does not exist/);
    assert.deepEqual((await cp.listKeys())[0]!.dataSets, ['a']);
    await cp.close();
  });

  run('limits: defaults overlaid with overrides, validated as a whole; listings in byte order', async (h) => {
    const cp = h.open(new SecretBox(randomBytes(32)));
    for (const id of ['b', 'B', 'a.1', 'a']) await cp.createDataSet(id);
    assert.deepEqual((await cp.listDataSets()).map((d) => d.id), ['B', 'a', 'a.1', 'b']);
    const defaults = (await cp.listDataSets())[0]!.limits;
    const limited = await cp.setLimits('b', { rps: 5, burstRps: 10 });
    assert.equal(limited.limits.rps, 5);
    assert.equal(limited.limits.burstRps, 10);
    const v = await cp.version();
    await assert.rejects(cp.setLimits('b', { burstRps: 1 }), /burst-rps must be at least rps/);
    assert.equal(await cp.version(), v);
    // Setting a limit back to its default stores no override: the data set follows the defaults again.
    const back = await cp.setLimits('b', { rps: defaults.rps, burstRps: defaults.burstRps });
    assert.deepEqual(back.limits, defaults);
    assert.deepEqual((await cp.loadSnapshot()).dataSets.get('b')!.limits, defaults);
    await cp.close();
  });

  run('secrets never appear in plain text in the stored rows', async (h) => {
    const cp = h.open(new SecretBox(randomBytes(32)));
    await cp.createDataSet('ds');
    const issued = await cp.createKey(['ds']);
    const rotated = await cp.rotateKey(issued.keyId, 60_000);
    const dump = await h.dumpSigningKeys();
    assert.ok(dump.length > 0);
    assert.ok(!dump.includes(issued.secret), 'no plaintext secret');
    assert.ok(!dump.includes(rotated.secret), 'no plaintext rotated secret');
    await cp.close();
  });

  run('the master key fingerprint: stored on first use, another key is refused, older stores are checked by a sealed secret', async (h) => {
    const right = new SecretBox(randomBytes(32));
    const cp = h.open(right);
    await cp.createDataSet('a');
    const key = await cp.createKey(['a']);
    assert.equal(await h.storedFingerprint(), right.fingerprint());

    const wrong = h.open(new SecretBox(randomBytes(32)));
    await assert.rejects(wrong.loadSnapshot(), { name: 'SecretBoxError', message: /does not match the control plane/ });
    await assert.rejects(wrong.loadSnapshot(), h.name);
    await assert.rejects(wrong.createKey(['a']), /does not match the control plane/);
    await assert.rejects(wrong.rotateKey(key.keyId, 1000), /does not match the control plane/);
    assert.equal((await wrong.listKeys()).length, 1, 'nothing was written with the wrong key');

    // A store from before fingerprints: the first key that opens a sealed secret is recorded.
    await h.clearFingerprint();
    await assert.rejects(h.open(new SecretBox(randomBytes(32))).verifyMasterKey(), /does not match the control plane/);
    const legacyRight = h.open(right);
    await legacyRight.verifyMasterKey();
    assert.equal((await legacyRight.loadSnapshot()).keys.size, 1);
    assert.equal(await h.storedFingerprint(), right.fingerprint());
  });

  run('policy windows are kept exactly; a legacy policy row (whole mergeWindowSeconds) converts, never lost', async (h) => {
    const cp = h.open(new SecretBox(randomBytes(32)));
    await cp.createDataSet('a');
    await cp.createDataSet('legacy');
    await cp.setPolicy('a', { mergeWindowMs: 500 });
    const windows = new MergeWindows(cp);
    await windows.refresh();
    assert.equal(windows.mergeWindowMs('a'), 500);
    await h.writePolicyRow(
      'legacy',
      JSON.stringify({ consent: 'enforce', ip: 'keep', piiScan: 'redact', maxAgeSeconds: 7_776_000, mergeWindowSeconds: 3600, version: 3 }),
    );
    await windows.refresh();
    assert.equal(windows.mergeWindowMs('legacy'), 3_600_000);
    const next = await cp.setPolicy('legacy', { consent: 'off' });
    assert.equal(next.policy.mergeWindowMs, 3_600_000);
    assert.equal(next.policy.version, 4);
    await cp.close();
  });

  run('concurrent mutations from one process each commit once', async (h) => {
    const cp = h.open(new SecretBox(randomBytes(32)));
    const v0 = await cp.version();
    await Promise.all(Array.from({ length: 20 }, (_, i) => cp.createDataSet(`ds${String(i).padStart(2, '0')}`)));
    await Promise.all(Array.from({ length: 10 }, (_, i) => cp.setPolicy('ds00', { maxAgeSeconds: 100 + i })));
    assert.equal(await cp.version(), v0 + 30);
    assert.equal((await cp.listDataSets()).length, 20);
    assert.equal((await cp.listDataSets())[0]!.policy.version, 11);
    await cp.close();
  });
}
