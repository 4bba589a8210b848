import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { loadMasterKey, parseMasterKey, SecretBox } from '../../src/control/secret-box.js';
import { tempDataDir } from '../helpers/server-process.js';

test('seal/open round-trips and the ciphertext does not contain the plaintext', () => {
  const box = new SecretBox(randomBytes(32));
  const sealed = box.seal('sk_topsecret', 'key_1');
  assert.ok(!sealed.toString('latin1').includes('sk_topsecret'));
  assert.equal(box.open(sealed, 'key_1'), 'sk_topsecret');
});

test('a sealed secret does not open under another key id or another master key', () => {
  const box = new SecretBox(randomBytes(32));
  const sealed = box.seal('sk_topsecret', 'key_1');
  assert.throws(() => box.open(sealed, 'key_2'), /master key/);
  assert.throws(() => new SecretBox(randomBytes(32)).open(sealed, 'key_1'), /master key/);
  const tampered = Buffer.from(sealed);
  tampered[tampered.length - 1]! ^= 1;
  assert.throws(() => box.open(tampered, 'key_1'));
});

test('the master key file is created once with mode 0600 and reused; ECAPI_MASTER_KEY wins', () => {
  const dir = tempDataDir();
  const first = loadMasterKey(dir, {});
  const second = loadMasterKey(dir, {});
  assert.deepEqual(first, second);
  assert.equal(statSync(join(dir, 'master.key')).mode & 0o777, 0o600);
  assert.equal(parseMasterKey(readFileSync(join(dir, 'master.key'), 'utf8')).length, 32);
  const hex = randomBytes(32).toString('hex');
  assert.deepEqual(loadMasterKey(dir, { ECAPI_MASTER_KEY: hex }), Buffer.from(hex, 'hex'));
  assert.throws(() => loadMasterKey(dir, { ECAPI_MASTER_KEY: 'short' }), /32 bytes/);
});
