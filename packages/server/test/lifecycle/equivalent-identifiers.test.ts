/**
 * The spellings `identities forget --identifier` looks up (lifecycle/equivalent-identifiers.ts):
 * each canonicalizes to the target's canonical form (so forget reaches no more than suppression
 * matches), and every spelling the view can hold of it is among them.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { equivalentIdentifiers } from '../../src/lifecycle/equivalent-identifiers.js';
import { canonicalIdentifier } from '../../src/lifecycle/identifier-digest.js';
import { identifiersOf, normalizeEvent } from '../../src/merged-view/identity.js';

const H = 'a'.repeat(32) + '0123456789abcdef'.repeat(2);
const DEVICE = '6f9619ff-8b86-d011-b42d-00cf4fc964ff';

/** The identifiers the merged view links for an event's user_data. */
const linked = (userData: Record<string, unknown>) => identifiersOf(normalizeEvent({ user_data: userData }));

test('a digest: the same hex in every hashed field, and nothing that canonicalizes elsewhere', () => {
  const spellings = equivalentIdentifiers(`email:${H}`);
  assert.equal(spellings[0], `email:${H}`, 'the target first');
  for (const s of spellings) assert.equal(canonicalIdentifier(s), `sha256:${H}`, s);
  for (const userData of [{ email_address: [H] }, { phone_numbers: [H.toUpperCase()] }, { customer_identifier: H.toUpperCase() }, { uids: [{ source: 'x.com', id: H.toUpperCase() }] }]) {
    for (const id of linked(userData)) assert.ok(spellings.includes(id), `${id} is looked up`);
  }
});

test('a device id: every spelling the view can hold as ifa (the other identifier fields take digests only)', () => {
  const spellings = equivalentIdentifiers(`ifa:${DEVICE}`);
  assert.equal(spellings[0], `ifa:${DEVICE}`);
  for (const s of spellings) assert.equal(canonicalIdentifier(s), `uuid:${DEVICE}`, s);
  const plain = DEVICE.replaceAll('-', '');
  const sent = [DEVICE, DEVICE.toUpperCase(), plain, plain.toUpperCase(), `{${DEVICE}}`, `{${DEVICE.toUpperCase()}}`, `{${plain}}`, `urn:uuid:${DEVICE}`, `URN:UUID:${plain}`];
  for (const value of [...sent, ` ${DEVICE} `]) {
    for (const id of linked({ ifa: value })) assert.ok(spellings.includes(id), `${id} (sent ${JSON.stringify(value)}) is looked up`);
  }
});

test('anything else is itself alone', () => {
  assert.deepEqual(equivalentIdentifiers('uid:user-123'), ['uid:user-123']);
  assert.deepEqual(equivalentIdentifiers('ifa:not-a-uuid'), ['ifa:not-a-uuid']);
});
