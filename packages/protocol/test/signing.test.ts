import { test } from 'node:test';
import assert from 'node:assert/strict';
import { signBody, SIGNATURE_PATTERN } from '../src/signing.js';

test('signBody matches the RFC 4231 HMAC-SHA256 test case 2', () => {
  // RFC 4231 section 4.3: key "Jefe", data "what do ya want for nothing?"
  assert.equal(
    signBody('what do ya want for nothing?', 'Jefe'),
    '5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843',
  );
});

test('signBody signs strings as UTF-8 bytes, identical to signing the encoded buffer', () => {
  const body = '{"name":"Zoë ✓"}';
  assert.equal(signBody(body, 's3cret'), signBody(Buffer.from(body, 'utf8'), 's3cret'));
  assert.match(signBody(body, 's3cret'), SIGNATURE_PATTERN);
});

test('a re-serialized body does not carry the same signature', () => {
  const sent = '{"a":1, "b":2}';
  const reserialized = JSON.stringify(JSON.parse(sent));
  assert.notEqual(signBody(sent, 'k'), signBody(reserialized, 'k'));
});
