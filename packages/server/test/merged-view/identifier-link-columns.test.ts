/**
 * The compact form of the embedded view's identifier links (merged-view/identifier-link-columns.ts):
 * exact both ways, and files of earlier versions migrated on first open.
 *
 * The fixture test/fixtures/view-c0e5b81-sharded is a real view made by main at c0e5b81, the last
 * version with text links: the sharded layout with two identity parts (view.db, view-p1.db) and two
 * record shards (view-s0.db, view-s1.db) that applied view-23489c0's queue.db (80 events of two data
 * sets, re-sends, shared identifiers, customer identifiers that are not digests).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { environmentDir, queueDbFile, viewDbFile } from '../../src/config.js';
import { SqlitePartitions } from '../../src/consumer/sqlite-partitions.js';
import { SqliteViewEraser } from '../../src/lifecycle/sqlite-view-eraser.js';
import {
  identifierOfStored,
  identityKeyOfStored,
  migrateIdentifierLinks,
  storedDigestHex,
  storedIdentifier,
  storedIdentityKey,
} from '../../src/merged-view/identifier-link-columns.js';
import { encodeIdentifier, encodeStoredIdentifier, IdentifierLinkTable } from '../../src/merged-view/identifier-link-table.js';
import { SqlitePartitionedView } from '../../src/merged-view/partitioned-view-store.js';
import { tempDataDir } from '../helpers/server-process.js';
import { viewSnapshot } from '../helpers/view-snapshot.js';

const FIXTURES = fileURLToPath(new URL('../../../test/fixtures/', import.meta.url));

const hex64 = fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: 64, maxLength: 64 });
const identifier = fc.oneof(
  fc.tuple(fc.constantFrom('email:', 'phone:', 'cid:', 'uid:'), hex64).map(([p, h]) => p + h),
  fc.tuple(fc.constantFrom('email:', 'cid:', 'uid:'), hex64).map(([p, h]) => p + h.toUpperCase()),
  fc.tuple(fc.constantFrom('email:', 'cid:', 'ifa:', 'uid:', ''), fc.string({ maxLength: 80 })).map(([p, s]) => p + s),
  fc.tuple(fc.constantFrom('email:', 'cid:'), hex64).map(([p, h]) => p + h.slice(1)),
);

test('an identifier is stored as a 33-byte digest or as its text, and read back exactly; distinct identifiers stay distinct', () => {
  const email = `email:${'ab'.repeat(32)}`;
  const stored = storedIdentifier(email);
  assert.ok(Buffer.isBuffer(stored));
  assert.equal(stored.length, 33);
  assert.equal(stored[0], 1);
  assert.equal(stored.toString('hex', 1), 'ab'.repeat(32));
  assert.equal(storedDigestHex(email), stored.toString('hex'));
  for (const text of ['cid:c0', `email:${'AB'.repeat(32)}`, `ifa:${'a'.repeat(36)}`, `phone:${'a'.repeat(63)}`, `uid:${'g'.repeat(64)}`]) {
    assert.equal(storedIdentifier(text), text, text);
    assert.equal(storedDigestHex(text), null, text);
  }
  const key = (s: Buffer | string) => (typeof s === 'string' ? `t${s}` : `b${s.toString('hex')}`);
  fc.assert(
    fc.property(identifier, identifier, (a, b) => {
      const sa = storedIdentifier(a);
      assert.equal(identifierOfStored(sa), a);
      assert.equal(key(sa) === key(storedIdentifier(b)), a === b);
      const hex = storedDigestHex(a);
      assert.equal(hex, typeof sa === 'string' ? null : sa.toString('hex'));
    }),
    { numRuns: 2000 },
  );
});

test("the hot state's table keys a stored digest as it keys its text (a full load from the file decodes nothing)", () => {
  const fromText = new Uint32Array(9);
  const fromStored = new Uint32Array(9);
  fc.assert(
    fc.property(identifier, (id) => {
      encodeIdentifier(id, fromText);
      encodeStoredIdentifier(storedIdentifier(id), fromStored);
      assert.deepEqual(fromStored, fromText);
    }),
    { numRuns: 2000 },
  );
  const table = new IdentifierLinkTable();
  const email = `email:${'5e'.repeat(32)}`;
  assert.equal(table.set(storedIdentifier(email) as Buffer, 7), true);
  assert.equal(table.set('cid:customer-1', 'ik_8'), true);
  assert.equal(table.get(email), 'ik_7');
  assert.equal(table.get('cid:customer-1'), 'ik_8');
  assert.equal(table.set('cid:customer-2', 'key-of-another-form'), false, 'the table holds seqs only');
});

test('an identity key ik_<seq> is stored as its seq, a key of another form as its text; ik_ keys of another form are refused', () => {
  for (const seq of [0, 1, 42, 2 ** 53 - 1]) {
    assert.equal(storedIdentityKey(`ik_${seq}`), BigInt(seq));
    assert.equal(identityKeyOfStored(seq), `ik_${seq}`);
    assert.equal(identityKeyOfStored(BigInt(seq)), `ik_${seq}`);
  }
  for (const other of ['a', 'id_1', '1', '', 'IK_1', 'ik']) {
    assert.equal(storedIdentityKey(other), other);
    assert.equal(identityKeyOfStored(other), other);
  }
  for (const bad of ['ik_', 'ik_01', 'ik_1.5', 'ik_-1', 'ik_9007199254740993', 'ik_1e3', 'ik_x']) assert.throws(() => storedIdentityKey(bad), /unknown form/, bad);
});

/** A view file with the links table of earlier versions (text columns), holding `links`. */
function earlierLinksFile(links: readonly [string, string, string][]): string {
  const file = join(tempDataDir('ecapi-links-'), 'view.db');
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.exec(`CREATE TABLE identity_identifiers (data_set_id TEXT NOT NULL, identifier TEXT NOT NULL, identity_key TEXT NOT NULL, PRIMARY KEY (data_set_id, identifier)) WITHOUT ROWID;
    CREATE INDEX identity_identifiers_key ON identity_identifiers (data_set_id, identity_key);`);
  const insert = db.prepare('INSERT INTO identity_identifiers VALUES (?, ?, ?)');
  for (const link of links) insert.run(...link);
  db.close();
  return file;
}

const readLinks = (db: Database.Database) =>
  (db.prepare('SELECT data_set_id, identifier, identity_key FROM identity_identifiers').raw().all() as [string, Buffer | string, number | string][])
    .map(([d, i, k]) => `${d} ${identifierOfStored(i)} ${identityKeyOfStored(k)}`)
    .sort();

test('a file of an earlier version: its links rewritten in one transaction, every link read back alike, no old text left in the file, and an earlier writer refused', () => {
  const digest = 'c3'.repeat(32);
  const links: [string, string, string][] = [
    ['ds-a', `email:${digest}`, 'ik_1'],
    ['ds-a', `phone:${'0f'.repeat(32)}`, 'ik_1'],
    ['ds-a', 'cid:customer-7', 'ik_12'],
    ['ds-a', 'cid:customer-8', 'key-of-another-form'],
    ['ds-b', `email:${digest}`, 'ik_3'],
    ['ds-b', `uid:${'AA'.repeat(32)}`, 'ik_3'],
    ...Array.from({ length: 500 }, (_, i): [string, string, string] => ['ds-b', `email:${i.toString(16).padStart(64, '0')}`, `ik_${100 + (i % 7)}`]),
  ];
  const file = earlierLinksFile(links);
  const db = new Database(file);
  try {
    db.pragma('secure_delete = ON');
    assert.equal(migrateIdentifierLinks(db), links.length);
    assert.equal(migrateIdentifierLinks(db), 0, 'done once');
    assert.deepEqual(readLinks(db), links.map(([d, i, k]) => `${d} ${i} ${k}`).sort());
    const types = db.prepare('SELECT typeof(identifier) AS i, typeof(identity_key) AS k, count(*) AS n FROM identity_identifiers GROUP BY 1, 2 ORDER BY 1, 2').all();
    assert.deepEqual(types, [
      { i: 'blob', k: 'integer', n: links.length - 3 },
      { i: 'text', k: 'integer', n: 2 },
      { i: 'text', k: 'text', n: 1 },
    ]);
    assert.deepEqual(db.prepare("SELECT name FROM sqlite_master WHERE tbl_name = 'identity_identifiers' ORDER BY name").pluck().all(), [
      'identity_identifiers',
      'identity_identifiers_key',
    ]);
    // A writer of an earlier version (text identity keys) fails instead of writing links this version would not find.
    assert.throws(() => db.prepare("INSERT INTO identity_identifiers VALUES ('ds-a', 'email:x', 'ik_9')").run(), /CHECK constraint failed/);
    db.prepare("INSERT INTO identity_identifiers VALUES ('ds-a', 'email:x', 9)").run();
    db.pragma('wal_checkpoint(TRUNCATE)');
  } finally {
    db.close();
  }
  const bytes = readFileSync(file);
  assert.ok(bytes.includes(Buffer.from(digest, 'hex')), 'the digest is in the file, as bytes');
  assert.equal(bytes.includes(Buffer.from(`email:${digest}`)), false, 'its earlier text form is not (secure_delete zeroed the old pages)');
});

/** A data dir holding fixture files in the production environment. */
function fixtureDataDir(fixture: string, files: readonly string[]): string {
  const dataDir = tempDataDir('ecapi-links-fixture-');
  mkdirSync(environmentDir(dataDir, 'production'), { recursive: true, mode: 0o700 });
  for (const file of files) copyFileSync(join(FIXTURES, fixture, file), join(environmentDir(dataDir, 'production'), file));
  return dataDir;
}

test('a sharded view made by main at c0e5b81 (text links) is migrated on first open: read as this version reads the same queue, found by identifier, erased by identifier', { timeout: 60_000 }, async () => {
  const dataDir = fixtureDataDir('view-c0e5b81-sharded', ['view.db', 'view-p1.db', 'view-s0.db', 'view-s1.db']);
  copyFileSync(join(FIXTURES, 'view-23489c0', 'queue.db'), queueDbFile(dataDir, 'production'));
  const viewFile = viewDbFile(dataDir, 'production');
  const textLinks = (file: string) => {
    const db = new Database(file, { readonly: true });
    try {
      return db.prepare("SELECT count(*) FROM identity_identifiers WHERE typeof(identity_key) = 'text'").pluck().get() as number;
    } finally {
      db.close();
    }
  };
  assert.ok(textLinks(viewFile) > 0 && textLinks(join(environmentDir(dataDir, 'production'), 'view-p1.db')) > 0, 'the fixture has text links');

  const fresh = join(tempDataDir('ecapi-links-fresh-'), 'view.db');
  const freshView = new SqlitePartitionedView(fresh);
  freshView.fixLayout({ partitions: 2, kind: 'sharded' });
  const partitions = new SqlitePartitions({ queueFile: queueDbFile(dataDir, 'production'), viewFile: fresh, partitions: 2, batchSize: 7, windows: () => [], sharded: true });
  assert.equal(await partitions.drain(), 160);
  await partitions.release();
  {
    const db = new Database(fresh, { readonly: true });
    try {
      const types = db.prepare('SELECT DISTINCT typeof(identifier) || \' \' || typeof(identity_key) FROM identity_identifiers ORDER BY 1').pluck().all();
      assert.deepEqual(types, ['blob integer', 'text integer'], 'this version writes digests as bytes and identity keys as integers');
    } finally {
      db.close();
    }
  }

  const old = new SqlitePartitionedView(viewFile);
  try {
    assert.deepEqual(old.layout(), { partitions: 2, kind: 'sharded' });
    assert.equal(textLinks(viewFile), 0, 'view.db migrated on open');
    const otherPart = join(environmentDir(dataDir, 'production'), 'view-p1.db');
    assert.ok(textLinks(otherPart) > 0, 'the other identity part waits for its first read');
    old.openFiles(); // what serve does at its start (SqliteStorage.prepareFiles)
    assert.equal(textLinks(otherPart), 0, 'every file of the layout migrated by openFiles');
    const identifiers = new Set<string>();
    for (const dataSetId of ['ds-a', 'ds-b']) {
      const want = await viewSnapshot(freshView, dataSetId);
      assert.deepEqual(await viewSnapshot(old, dataSetId), want, dataSetId);
      for (const record of want.records) {
        for (const id of record.identity?.identifiers ?? []) {
          identifiers.add(id);
          const key = await old.identityOfIdentifier(dataSetId, id);
          assert.ok(key !== null, 'found by identifier');
          assert.equal(await old.resolveIdentity(dataSetId, key), record.identityKey);
        }
      }
    }
    assert.ok([...identifiers].some((id) => Buffer.isBuffer(storedIdentifier(id))) && [...identifiers].some((id) => typeof storedIdentifier(id) === 'string'), 'both stored forms');
    assert.equal(await old.identityOfIdentifier('ds-a', `email:${'9'.repeat(64)}`), null);
  } finally {
    await old.close();
    await freshView.close();
  }

  // The lifecycle's eraser opening an identity part first (a copy no view store of this version opened).
  const part = join(environmentDir(fixtureDataDir('view-c0e5b81-sharded', ['view-p1.db']), 'production'), 'view-p1.db');
  assert.ok(textLinks(part) > 0);
  const db = new Database(part, { readonly: true });
  const [dataSetId, identifier] = db.prepare("SELECT data_set_id, identifier FROM identity_identifiers WHERE identifier LIKE 'email:%' LIMIT 1").raw().get() as [string, string];
  db.close();
  const eraser = new SqliteViewEraser(part);
  try {
    assert.equal(textLinks(part), 0, 'migrated by the eraser');
    const identity = await eraser.findIdentity(dataSetId, { identifier });
    assert.ok(identity !== null, 'found by identifier after the migration');
    assert.ok(identity.identifiers.includes(identifier));
  } finally {
    await eraser.close();
  }
});
