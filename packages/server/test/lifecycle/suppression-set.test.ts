/**
 * The suppression list matches by digest of the canonical identifier (lifecycle/identifier-digest.ts):
 * a suppressed hash whichever hashed field carries it, a suppressed device id however it is spelled.
 * The digests are the ones the store writes (SqliteLifecycleStore.digest, a real lifecycle.db) and
 * the set is the consumers' (SuppressionSet).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SuppressionSet } from '../../src/lifecycle/suppression-set.js';
import { SqliteLifecycleStore } from '../../src/lifecycle/sqlite-lifecycle-store.js';

const H = 'ab'.repeat(32);
const OTHER = 'cd'.repeat(32);
const DEVICE = '6f9619ff-8b86-d011-b42d-00cf4fc964ff';

async function withStore(fn: (store: SqliteLifecycleStore, key: Buffer) => Promise<void>) {
  const file = join(mkdtempSync(join(tmpdir(), 'ecapi-suppression-')), 'lifecycle.db');
  const store = new SqliteLifecycleStore(file);
  try {
    const Database = (await import('better-sqlite3')).default;
    const db = new Database(file, { readonly: true });
    const key = db.prepare('SELECT digest_key FROM lifecycle_meta WHERE id = 1').pluck().get() as Buffer;
    db.close();
    await fn(store, key);
  } finally {
    await store.close();
  }
}

test('a suppressed email hash is matched as customer_identifier, uids[].id or phone number; a suppressed device id in any spelling', () => withStore(async (store, key) => {
  const set = new SuppressionSet();
  set.load(key, 1, [
    { data_set_id: 'shop', digest: await store.digest('shop', `email:${H}`) },
    { data_set_id: 'shop', digest: await store.digest('shop', `ifa:${DEVICE.toUpperCase()}`) },
  ]);
  for (const identifiers of [[`email:${H}`], [`cid:${H}`], [`uid:${H}`], [`phone:${H}`], [`email:${OTHER}`, `cid:${H}`]]) {
    assert.equal(set.suppressed('shop', identifiers), true, identifiers.join(','));
  }
  for (const spelling of [DEVICE, DEVICE.replaceAll('-', ''), `{${DEVICE}}`, `urn:uuid:${DEVICE}`]) {
    assert.equal(set.suppressed('shop', [`ifa:${spelling}`]), true, spelling);
  }
  assert.equal(set.suppressed('shop', [`email:${OTHER}`, 'uid:ID5-Abc', 'ifa:11111111-2222-3333-4444-555555555555']), false);
  assert.equal(set.suppressed('other', [`email:${H}`]), false, 'per data set');
}));

test('the store writes canonical digests: a forget --suppress of email:<hash> suppresses the hash in every field', () => withStore(async (store) => {
  const request = await store.request({ dataSetId: 'shop', kind: 'forget_identifier', target: `email:${H}`, suppress: true, boundSeq: 0, actor: 't' });
  assert.equal(request.targetDigest, await store.digest('shop', `cid:${H}`), 'the target digest is the canonical one');
  const event = await store.request({ dataSetId: 'shop', kind: 'delete_event', target: `email:${H}`, suppress: false, boundSeq: 0, actor: 't' });
  assert.notEqual(event.targetDigest, request.targetDigest, 'an event id is digested as it is, never as an identifier');
  assert.equal(await store.digest('shop', `ifa:{${DEVICE}}`), await store.digest('shop', `ifa:${DEVICE.replaceAll('-', '')}`));
}));
