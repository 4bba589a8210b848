/** Known SHA-256 vectors pass the hash rule; their uppercase forms fail it. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isSha256Hex } from '../../src/validation/formats.js';
import { H1, H2, H3, NOW, minimal, processor, policy, sha } from './helpers.js';

const VECTORS: ReadonlyArray<readonly [string, string]> = [
  ['user@example.com', 'b4c9a289323b21a01c3e940f150eb9b8c542587f1abfd8f0e1cc1ffc5e475514'],
  ['+12125550000', '7c8d08bf90ca322bcac37f99ba14e980e4b1f5ba919f7e16a030af9070ba125e'],
  ['jane', '81f8f6dde88365f3928796ec7aa53f72820b06db8664f5fe76a7eb13e24546a2'],
];

test('node:crypto computes the published vectors', () => {
  for (const [input, digest] of VECTORS) assert.equal(sha(input), digest);
  assert.deepEqual([H1, H2, H3], VECTORS.map(([, d]) => d));
});

for (const [input, digest] of VECTORS) {
  test(`sha256(${JSON.stringify(input)}) passes the hash rule in every hashed field`, () => {
    assert.equal(isSha256Hex(digest), true);
    const event = minimal({
      user_data: {
        customer_identifier: digest, email_address: [digest], phone_numbers: [digest], gender: digest,
        uids: [{ id: digest }], address: [{ first_name: digest, last_name: digest, street: digest, postal_code: digest }],
      },
    });
    const result = processor.check(structuredClone(event), { nowSeconds: NOW, policy: policy() });
    assert.deepEqual(result, { ok: true, event, meta: undefined, modified: false });
  });

  test(`uppercase sha256(${JSON.stringify(input)}) fails the hash rule`, () => {
    const upper = digest.toUpperCase();
    assert.equal(isSha256Hex(upper), false);
    const result = processor.check(minimal({ user_data: { email_address: [upper] } }), { nowSeconds: NOW, policy: policy() });
    assert.deepEqual(result, { ok: false, error: 'hashed field user_data.email_address[0] is not a 64-char lowercase hex sha256' });
  });
}

test('isSha256Hex rejects every non-hex character position and non-ASCII look-alikes', () => {
  const digest = VECTORS[0]![1];
  for (let i = 0; i < 64; i++) {
    assert.equal(isSha256Hex(`${digest.slice(0, i)}g${digest.slice(i + 1)}`), false, `position ${i}`);
  }
  assert.equal(isSha256Hex(`${digest.slice(0, 63)}\u0661`), false); // ARABIC-INDIC DIGIT ONE
  assert.equal(isSha256Hex(`${digest.slice(0, 63)}\uff41`), false); // FULLWIDTH a
  assert.equal(isSha256Hex(''), false);
});
