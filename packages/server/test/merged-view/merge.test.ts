import { test } from 'node:test';
import assert from 'node:assert/strict';
import { canonicalJson, mergeEvents, recordKeyOf } from '../../src/merged-view/merge.js';

const h = (c: string) => c.repeat(64);

test('newer wins field by field, objects merge recursively, fields only in the older are kept', () => {
  const older = { id: 'o1', event_type: 'add_to_cart', value: 10, currency_code: 'USD', properties: { page_url: 'a', transaction_id: 't1' }, ext: { a: 1 } };
  const newer = { id: 'o1', event_type: 'purchase', value: 12, properties: { page_url: 'b' } };
  assert.deepEqual(mergeEvents(older, newer), {
    id: 'o1', event_type: 'purchase', value: 12, currency_code: 'USD', properties: { page_url: 'b', transaction_id: 't1' }, ext: { a: 1 },
  });
  // Inputs untouched.
  assert.equal(older.properties.page_url, 'a');
});

test('identifier arrays union without duplicates; other arrays are replaced', () => {
  const older = {
    user_data: {
      email_address: [h('a'), h('b')],
      phone_numbers: [h('c')],
      uids: [{ id: h('d'), source: 'x.com' }],
      address: [{ city: 'paris', country_code: 'fr' }],
      customer_segments: ['gold'],
    },
    properties: { items: [{ id: 'sku1' }, { id: 'sku2' }] },
  };
  const newer = {
    user_data: {
      email_address: [h('b'), h('e')],
      uids: [{ source: 'x.com', id: h('d') }, { id: h('f') }],
      address: [{ country_code: 'fr', city: 'paris' }, { city: 'lyon' }],
      customer_segments: ['silver'],
    },
    properties: { items: [{ id: 'sku3' }] },
  };
  assert.deepEqual(mergeEvents(older, newer), {
    user_data: {
      email_address: [h('a'), h('b'), h('e')],
      phone_numbers: [h('c')],
      uids: [{ id: h('d'), source: 'x.com' }, { id: h('f') }],
      address: [{ city: 'paris', country_code: 'fr' }, { city: 'lyon' }],
      customer_segments: ['silver'],
    },
    properties: { items: [{ id: 'sku3' }] },
  });
});

test('a scalar replaced by an object and vice versa: the newer value wins', () => {
  assert.deepEqual(mergeEvents({ ext: 1 }, { ext: { a: 1 } }), { ext: { a: 1 } });
  assert.deepEqual(mergeEvents({ ext: { a: 1 } }, { ext: 'x' }), { ext: 'x' });
  assert.deepEqual(mergeEvents({ a: 1 }, { a: null }), { a: null });
});

test('record key: the id, or the queue position without one', () => {
  assert.equal(recordKeyOf({ id: 'x' }, 5), 'id:x');
  assert.equal(recordKeyOf({}, 5), 'seq:5');
  assert.equal(recordKeyOf({ id: '' }, 6), 'seq:6');
});

test('canonical JSON ignores key order', () => {
  assert.equal(canonicalJson({ b: 1, a: [{ d: 1, c: 2 }] }), canonicalJson({ a: [{ c: 2, d: 1 }], b: 1 }));
});
