import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { encodeIdentifier, IdentifierLinkTable } from '../../src/merged-view/identifier-link-table.js';
import { identityKeySeq } from '../../src/model/identity-key.js';

const hex = (n: number) => fc.stringMatching(new RegExp(`^[0-9a-f]{${n}}$`));
const uuid = fc.tuple(hex(8), hex(4), hex(4), hex(4), hex(12)).map((p) => p.join('-'));

/** Identifiers of every kind the table encodes, and near misses that must take the digest path. */
const identifier = fc.oneof(
  fc.tuple(fc.constantFrom('email:', 'phone:', 'cid:', 'uid:'), hex(64)).map(([p, h]) => p + h),
  uuid.map((u) => `ifa:${u}`),
  // Near misses: uppercase hex, 63 or 65 digits, a UUID without dashes, another prefix, free text.
  hex(64).map((h) => `email:${h.toUpperCase()}`),
  hex(63).map((h) => `phone:${h}`),
  hex(65).map((h) => `cid:${h}`),
  hex(32).map((h) => `ifa:${h}`),
  uuid.map((u) => `ifa:${u.toUpperCase()}`),
  hex(64).map((h) => `ifa:${h}`),
  fc.string({ maxLength: 80 }).map((s) => `uid:${s}`),
  fc.string({ maxLength: 80 }),
);
/** A small pool, so that keys repeat and near misses meet the keys they resemble. */
const pool = fc.uniqueArray(identifier, { minLength: 1, maxLength: 40 });

const keyOf = (identifier: string) => {
  const out = new Uint32Array(9);
  encodeIdentifier(identifier, out);
  return [...out].join(',');
};

test('the encoding is injective: different identifiers never share a key, equal ones always do', () => {
  fc.assert(
    fc.property(pool, (ids) => {
      const seen = new Map<string, string>();
      for (const id of ids) {
        const key = keyOf(id);
        assert.equal(keyOf(id), key, 'the same identifier encodes the same way twice');
        const other = seen.get(key);
        assert.ok(other === undefined || other === id, `${JSON.stringify(id)} and ${JSON.stringify(other)} share a key`);
        seen.set(key, id);
      }
    }),
    { numRuns: 500 },
  );
  // The digest kinds are told apart by their tag, not only by their digits.
  const h = 'ab'.repeat(32);
  assert.equal(new Set(['email:', 'phone:', 'cid:', 'uid:'].map((p) => keyOf(p + h))).size, 4);
  assert.notEqual(keyOf(`ifa:${'0'.repeat(8)}-0000-0000-0000-${'0'.repeat(12)}`), keyOf(`email:${'0'.repeat(64)}`));
});

test('the table answers exactly as a Map: random sets and gets, through growth', () => {
  fc.assert(
    fc.property(
      pool,
      fc.array(fc.tuple(fc.nat(), fc.boolean(), fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER })), { maxLength: 300 }),
      fc.integer({ min: 0, max: 0xffffffff }),
      (ids, ops, seed) => {
        const table = new IdentifierLinkTable({ seed });
        const model = new Map<string, string>();
        for (const [i, isSet, seq] of ops) {
          const id = ids[i % ids.length]!;
          if (isSet) {
            assert.equal(table.set(id, `ik_${seq}`), true);
            model.set(id, `ik_${seq}`);
          }
          assert.equal(table.get(id), model.get(id));
        }
        assert.equal(table.size, model.size);
        for (const id of ids) assert.equal(table.get(id), model.get(id));
      },
    ),
    { numRuns: 300 },
  );
});

test('many keys: every one is found after the table grew, and none that was never set', () => {
  const table = new IdentifierLinkTable();
  const n = 50_000;
  const id = (i: number) => (i % 3 === 0 ? `email:${i.toString(16).padStart(64, '0')}` : i % 3 === 1 ? `ifa:${i.toString(16).padStart(8, '0')}-0000-4000-8000-000000000000` : `cid:customer-${i}`);
  for (let i = 0; i < n; i++) assert.equal(table.set(id(i), `ik_${i + 1}`), true);
  assert.equal(table.size, n);
  for (let i = 0; i < n; i++) assert.equal(table.get(id(i)), `ik_${i + 1}`);
  for (let i = n; i < n + 1000; i++) assert.equal(table.get(id(i)), undefined);
  // The memory it states: 48 bytes an entry in chunks of 256, 4-8 bytes an entry of bucket index.
  assert.ok(table.byteSize >= n * 52 && table.byteSize <= (n + 256) * 48 + n * 8, `byteSize ${table.byteSize}`);
  assert.equal(new IdentifierLinkTable().byteSize, 64 * 4, 'an empty table holds its bucket index only');
});

test('identity keys of another form are refused, and nothing is stored for them', () => {
  const table = new IdentifierLinkTable();
  for (const key of ['ik_', 'ik_01', 'ik_-1', 'ik_1.5', 'IK_1', 'x_1', 'ik_99999999999999999', `ik_${Number.MAX_SAFE_INTEGER + 2}`]) {
    assert.equal(identityKeySeq(key), -1, key);
    assert.equal(table.set('cid:x', key), false, key);
  }
  assert.equal(table.size, 0);
  assert.equal(table.get('cid:x'), undefined);
  assert.equal(identityKeySeq('ik_0'), 0);
  assert.equal(identityKeySeq(`ik_${Number.MAX_SAFE_INTEGER}`), Number.MAX_SAFE_INTEGER);
});

test('a chain past the bound (hash flooding) makes set answer false and leaves the table as it was', () => {
  // maxProbe 1: a key whose bucket already holds one cannot be placed. Which keys collide depends
  // on the seed; with 64 buckets and 48 keys some must.
  const table = new IdentifierLinkTable({ maxProbe: 1, seed: 1 });
  const placed: string[] = [];
  let refused: string | undefined;
  for (let i = 0; i < 48 && refused === undefined; i++) {
    const id = `cid:${i}`;
    if (table.set(id, `ik_${i + 1}`)) placed.push(id);
    else refused = id;
  }
  assert.ok(refused !== undefined, 'some key met a taken slot');
  assert.equal(table.size, placed.length);
  assert.equal(table.get(refused), undefined);
  for (const id of placed) assert.equal(table.get(id), `ik_${placed.indexOf(id) + 1}`);
});
