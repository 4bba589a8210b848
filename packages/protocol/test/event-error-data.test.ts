import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventErrors, eventErrorOf, eventErrorPrefixOf, type EventErrorCode } from '../src/index.js';

test('error() builds {code, message}: the definition\'s code and its template\'s message, which reads back as that code', () => {
  const args: Record<EventErrorCode, string[]> = {
    SCHEMA: ['unknown field foo'],
    MISSING_FIELD: ['timestamp'],
    INVALID_FIELD: ['currency_code', 'not an active ISO 4217 code'],
    NOT_HASHED: ['user_data.email_address[0]'],
    NOT_AUTHORIZED: ['shop'],
  };
  for (const code of Object.keys(args) as EventErrorCode[]) {
    const definition = EventErrors[code] as unknown as { error: (...a: string[]) => unknown; message: (...a: string[]) => string };
    const error = definition.error(...args[code]);
    assert.deepEqual(error, { code, message: definition.message(...args[code]) });
    assert.deepEqual(eventErrorOf(definition.message(...args[code])), error);
    assert.ok(definition.message(...args[code]).startsWith(eventErrorPrefixOf(code)));
  }
  assert.equal(eventErrorPrefixOf('INVALID_FIELD'), 'invalid field ');
  assert.equal(eventErrorPrefixOf('SCHEMA'), 'schema validation failed: ');
});
