/**
 * The suppression list matches by digest of the canonical identifier (lifecycle/identifier-digest.ts):
 * a suppressed hash whichever hashed field carries it, a suppressed device id however it is spelled.
 * Pure: the set, the canonical form and the digests the stores write (SqliteLifecycleStore.digest).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { canonicalIdentifier, canonicalUuid, suppressionDigest } from '../../src/lifecycle/identifier-digest.js';
import { SuppressionSet } from '../../src/lifecycle/suppression-set.js';
import { SqliteLifecycleStore } from '../../src/lifecycle/sqlite-lifecycle-store.js';

const H = 'ab'.repeat(32);
const OTHER = 'cd'.repeat(32);
const DEVICE = '6f9619ff-8b86-d011-b42d-00cf4fc964ff';

test('canonical form: a SHA-256 hash is one value in every hashed field; a UUID is lowercase hyphenated however written', () => {
  for (const type of ['email', 'phone', 'cid', 'uid']) {
    assert.equal(canonicalIdentifier(`${type}:${H}`), `sha256:${H}`);
    assert.equal(canonicalIdentifier(`${type}:${H.toUpperCase()}`), `sha256:${H}`);
  }
  for (const spelling of [DEVICE, DEVICE.toUpperCase(), DEVICE.replaceAll('-', ''), `{${DEVICE}}`, `{${DEVICE.toUpperCase()}}`, `urn:uuid:${DEVICE}`, ` ${DEVICE} `]) {
    assert.equal(canonicalUuid(spelling), DEVICE, spelling);
    assert.equal(canonicalIdentifier(`ifa:${spelling}`), `uuid:${DEVICE}`, spelling);
  }
  assert.equal(canonicalIdentifier(`uid:${DEVICE.replaceAll('-', '')}`), `uuid:${DEVICE}`);
  // Not a UUID: unbalanced braces, wrong group lengths, not hex; other values keep their typed form.
  for (const notUuid of [`{${DEVICE}`, '6f9619ff-8b86-d011-b42d-00cf4fc964f', 'zz9619ff-8b86-d011-b42d-00cf4fc964ff', 'AEBE52E7-03EE-455A']) assert.equal(canonicalUuid(notUuid), null, notUuid);
  assert.equal(canonicalIdentifier('uid:ID5-Abc'), 'uid:ID5-Abc');
  assert.equal(canonicalIdentifier('ifa:roku-0001'), 'ifa:roku-0001');
  assert.equal(canonicalIdentifier('ik_12'), 'ik_12');
});

test('a suppressed email hash is matched as customer_identifier, uids[].id or phone number; a suppressed device id in any spelling', () => {
  const key = randomBytes(32);
  const set = new SuppressionSet();
  set.load(key, 1, [
    { data_set_id: 'shop', digest: suppressionDigest(key, 'shop', `email:${H}`) },
    { data_set_id: 'shop', digest: suppressionDigest(key, 'shop', `ifa:${DEVICE.toUpperCase()}`) },
  ]);
  for (const identifiers of [[`email:${H}`], [`cid:${H}`], [`uid:${H}`], [`phone:${H}`], [`email:${OTHER}`, `cid:${H}`]]) {
    assert.equal(set.suppressed('shop', identifiers), true, identifiers.join(','));
  }
  for (const spelling of [DEVICE, DEVICE.replaceAll('-', ''), `{${DEVICE}}`, `urn:uuid:${DEVICE}`]) {
    assert.equal(set.suppressed('shop', [`ifa:${spelling}`]), true, spelling);
  }
  assert.equal(set.suppressed('shop', [`email:${OTHER}`, 'uid:ID5-Abc', 'ifa:11111111-2222-3333-4444-555555555555']), false);
  assert.equal(set.suppressed('other', [`email:${H}`]), false, 'per data set');
});

test('the store writes canonical digests: a forget --suppress of email:<hash> suppresses the hash in every field', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ecapi-suppression-'));
  const store = new SqliteLifecycleStore(join(dir, 'lifecycle.db'));
  try {
    const request = await store.request({ dataSetId: 'shop', kind: 'forget_identifier', target: `email:${H}`, suppress: true, boundSeq: 0, actor: 't' });
    assert.equal(request.targetDigest, await store.digest('shop', `cid:${H}`), 'the target digest is the canonical one');
    const event = await store.request({ dataSetId: 'shop', kind: 'delete_event', target: `email:${H}`, suppress: false, boundSeq: 0, actor: 't' });
    assert.notEqual(event.targetDigest, request.targetDigest, 'an event id is digested as it is, never as an identifier');
    assert.equal(await store.digest('shop', `ifa:{${DEVICE}}`), await store.digest('shop', `ifa:${DEVICE.replaceAll('-', '')}`));
  } finally {
    await store.close();
  }
});
