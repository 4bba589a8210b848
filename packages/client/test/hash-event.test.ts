import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NormalizationError, hashEvent, sha256Hex, validateEvent, type PlaintextEvent } from '../src/index.js';

const H = {
  email: 'b4c9a289323b21a01c3e940f150eb9b8c542587f1abfd8f0e1cc1ffc5e475514',
  phone: '7c8d08bf90ca322bcac37f99ba14e980e4b1f5ba919f7e16a030af9070ba125e',
  jane: '81f8f6dde88365f3928796ec7aa53f72820b06db8664f5fe76a7eb13e24546a2',
  female: '9f165139a8c2894a47aea23b77d330eca847264224a44d5a17b19db8b9a72c08',
  user123: 'e606e38b0d8c19b24cf0ee3808183162ea7cd63ff7912dbb22b5e803286b4446',
};

const plaintext = (): PlaintextEvent => ({
  data_set_id: 'shop',
  id: 'order-1',
  timestamp: 1746558464,
  event_type: 'purchase',
  value: 10,
  currency_code: 'USD',
  user_data: {
    customer_identifier: 'User123',
    email_address: [' User@example.com '],
    phone_numbers: ['+1 212-555-0000'],
    gender: ' Female ',
    uids: [{ id: 'User123', source: 'example.com', atype: 1 }],
    address: [{ first_name: ' Jane ', last_name: 'Doe', street: '1 Main St.', city: ' New York ', state: 'NY', country_code: 'US', postal_code: '10001-1234', address_type: 'billing' }],
    gpp_sid: [7],
    mmt_only: false,
  },
  properties: { transaction_id: 'T1' },
});

test('hashEvent hashes every plaintext identifier and normalizes the plain-text address fields', () => {
  const input = plaintext();
  const before = structuredClone(input);
  const hashed = hashEvent(input);
  assert.deepEqual(input, before, 'the input is not modified');
  assert.deepEqual(hashed, {
    ...before,
    user_data: {
      customer_identifier: H.user123,
      email_address: [H.email],
      phone_numbers: [H.phone],
      gender: H.female,
      uids: [{ id: H.user123, source: 'example.com', atype: 1 }],
      address: [{ first_name: H.jane, last_name: sha256Hex('doe'), street: sha256Hex('1 main st'), city: 'new york', state: 'ny', country_code: 'us', postal_code: sha256Hex('10001'), address_type: 'billing' }],
      gpp_sid: [7],
      mmt_only: false,
    },
  });
  assert.equal(validateEvent(hashed), undefined, 'the hashed event passes the schema');
  assert.match(String(validateEvent(input)?.message), /hashed field user_data.customer_identifier/, 'the plaintext one does not');
});

test('hashEvent is idempotent: already-hashed values are kept by default', () => {
  const once = hashEvent(plaintext());
  assert.deepEqual(hashEvent(once), once);
});

test('alreadyHashed: "refuse" throws on a digest, naming the field but not the value', () => {
  const once = hashEvent(plaintext());
  assert.throws(() => hashEvent(once, { alreadyHashed: 'refuse' }), (error: Error) => {
    assert.equal(error.name, 'NormalizationError');
    assert.match(error.message, /^user_data\.customer_identifier is already a SHA-256 digest/);
    assert.ok(!error.message.includes(H.user123));
    return true;
  });
  assert.doesNotThrow(() => hashEvent(plaintext(), { alreadyHashed: 'refuse' }));
});

test('single strings where the schema wants arrays are wrapped', () => {
  const hashed = hashEvent({ data_set_id: 'shop', timestamp: 1, event_type: 'purchase', user_data: { email_address: 'User@example.com', phone_numbers: '(212) 555-0000', address: { first_name: 'Jane' } } }, { defaultRegion: 'US' });
  assert.deepEqual(hashed.user_data, { email_address: [H.email], phone_numbers: [H.phone], address: [{ first_name: H.jane }] });
});

test('an identifier that cannot be normalized throws, naming the field only', () => {
  assert.throws(() => hashEvent({ data_set_id: 's', timestamp: 1, event_type: 'purchase', user_data: { phone_numbers: ['555 0000 secret'] } }), (error: Error) => {
    assert.match(error.message, /^user_data\.phone_numbers\[0\]: /);
    assert.ok(!error.message.includes('secret'));
    assert.equal(error.name, 'NormalizationError');
    assert.ok(error.cause instanceof NormalizationError, 'the normalizer\'s own error is kept as the cause');
    assert.ok(!(error.cause as Error).message.includes('secret'));
    return true;
  });
  assert.throws(() => hashEvent({ data_set_id: 's', timestamp: 1, event_type: 'purchase', user_data: { email_address: [42 as unknown as string] } }), /email_address\[0\] must be a string/);
});

test('events without user_data are returned as they are', () => {
  const event = { data_set_id: 's', timestamp: 1, event_type: 'page_view' as const };
  assert.equal(hashEvent(event), event);
});
