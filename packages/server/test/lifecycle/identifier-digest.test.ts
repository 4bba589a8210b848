/**
 * The canonical form suppression digests are taken of (lifecycle/identifier-digest.ts): a SHA-256
 * hash is one value in every hashed field, a UUID one value however it is written. Pure.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { canonicalIdentifier, canonicalUuid } from '../../src/lifecycle/identifier-digest.js';

const H = 'ab'.repeat(32);
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

