import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventErrors, eventErrorOf, fromJsonPointer, joinPath, loadEventSchema, type EventErrorCode } from '../src/index.js';

test('eventErrorOf reads back the code of every template, and OTHER for any other text', () => {
  const samples: Record<EventErrorCode, string> = {
    SCHEMA: EventErrors.SCHEMA.message('unknown field foo'),
    MISSING_FIELD: EventErrors.MISSING_FIELD.message('timestamp'),
    INVALID_FIELD: EventErrors.INVALID_FIELD.message('currency_code', 'not an active ISO 4217 code'),
    NOT_HASHED: EventErrors.NOT_HASHED.message('user_data.email_address[0]'),
    NOT_AUTHORIZED: EventErrors.NOT_AUTHORIZED.message('shop'),
  };
  for (const [code, message] of Object.entries(samples)) assert.deepEqual(eventErrorOf(message), { code, message });
  assert.equal(samples.MISSING_FIELD, 'missing required field: timestamp', 'the spec\'s shape, letter for letter');
  assert.deepEqual(eventErrorOf('consent: measurement not permitted'), { code: 'OTHER', message: 'consent: measurement not permitted' });
  assert.equal(eventErrorOf('invalid fieldx').code, 'OTHER', 'a prefix is the template\'s fixed text, space included');
});

test('field paths: identifiers dotted, indexes bracketed, odd keys quoted and cut at 40 characters', () => {
  assert.equal(fromJsonPointer('/user_data/address/0/postal_code'), 'user_data.address[0].postal_code');
  assert.equal(fromJsonPointer(''), 'event');
  assert.equal(fromJsonPointer('/properties/a~1b'), 'properties["a/b"]');
  const odd = 'a-'.repeat(30);
  assert.equal(joinPath('properties', odd), `properties["${odd.slice(0, 40)}…"]`);
  assert.equal(joinPath('', 'value'), 'value');
});

test('loadEventSchema loads the published schema, a fresh copy each time', () => {
  const a = loadEventSchema();
  assert.equal((a.$defs as Record<string, unknown>).Event !== undefined, true);
  (a as { changed?: boolean }).changed = true;
  assert.equal((loadEventSchema() as { changed?: boolean }).changed, undefined);
});
