import { test } from 'node:test';
import assert from 'node:assert/strict';
import { coverageOf, identifiersOf, normalizeEvent } from '../../src/merged-view/identity.js';

const h = (c: string) => c.repeat(64);

test('address plain text is trimmed and lowercased; country code canonical; duplicates dropped', () => {
  const event = normalizeEvent({
    id: 'x',
    user_data: {
      address: [
        { city: '  New   York ', state: ' NY', country_code: ' US ', street: h('A') },
        { city: 'new york', state: 'ny', country_code: 'us', street: h('a') },
      ],
      email_address: [h('A'), h('a'), h('b')],
      phone_numbers: [h('c'), h('c')],
      uids: [{ id: h('D'), source: ' Example.COM ' }, { id: h('d'), source: 'example.com' }],
      customer_identifier: h('E'),
    },
  });
  assert.deepEqual(event.user_data, {
    address: [{ city: 'new york', state: 'ny', country_code: 'us', street: h('a') }],
    email_address: [h('a'), h('b')],
    phone_numbers: [h('c')],
    uids: [{ id: h('d'), source: 'example.com' }],
    customer_identifier: h('e'),
  });
});

test('an event without user_data is returned as is', () => {
  const e = { id: 'x', event_type: 'purchase' };
  assert.equal(normalizeEvent(e), e);
});

test('identifiers: customer id, emails, phones, uids ids and ifa, typed and sorted', () => {
  const ids = identifiersOf(normalizeEvent({
    user_data: {
      customer_identifier: h('1'),
      email_address: [h('2'), h('3')],
      phone_numbers: [h('4')],
      uids: [{ id: h('5'), source: 's.com' }],
      ifa: ' ABC-DEF ',
      event_ip_address: '1.2.3.4',
      click_id: 'c',
    },
  }));
  assert.deepEqual(ids, [`cid:${h('1')}`, `email:${h('2')}`, `email:${h('3')}`, 'ifa:abc-def', `phone:${h('4')}`, `uid:${h('5')}`]);
  assert.deepEqual(identifiersOf({}), []);
});

test('coverage flags', () => {
  assert.deepEqual(
    coverageOf({ user_data: { email_address: [h('a')], event_ip_address: '1.1.1.1', event_user_agent: 'ua', address: [{ city: 'x' }] } }),
    { email: true, phone: false, address: true, customer_id: false, ip_user_agent: true, click_id: false },
  );
  assert.deepEqual(
    coverageOf({ user_data: { event_ip_address: '1.1.1.1', address: [{ address_type: 1 }], click_id: 'k', customer_identifier: h('c'), phone_numbers: [h('p')] } }),
    { email: false, phone: true, address: false, customer_id: true, ip_user_agent: false, click_id: true },
  );
});
