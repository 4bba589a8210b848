import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { eventErrorOf, uuidv7, validateEvent, EVENT_TYPES, type EcapiEvent } from '../src/index.js';
import { GENERATED_FILE, generateEventTypes, loadSchema } from '../scripts/generate-event-types.js';

test('uuidv7 (the uuid package): RFC 9562 layout, the time in the first 48 bits, unique and in order', () => {
  const now = Date.parse('2025-05-06T19:07:44.123Z');
  const id = uuidv7(now);
  assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.equal(parseInt(id.replace(/-/g, '').slice(0, 12), 16), now);
  const list = Array.from({ length: 20_000 }, () => uuidv7());
  assert.equal(new Set(list).size, 20_000);
  assert.deepEqual([...list].sort(), list, 'ids made in one millisecond still sort in creation order');
});

test('the committed event types are generated from the current schema (regenerate: npm run generate -w packages/client)', () => {
  const committed = readFileSync(GENERATED_FILE, 'utf8');
  assert.equal(committed, generateEventTypes(loadSchema()), 'src/event-types.generated.ts is stale');
});

test('the generator refuses schema keywords it does not understand', () => {
  const schema = loadSchema();
  const changed = structuredClone(schema) as { $defs: Record<string, Record<string, unknown>> };
  changed.$defs.Uid!.oneOf = [];
  assert.throws(() => generateEventTypes(changed), /unsupported keyword "oneOf"/);
});

test('generated constants and types match the schema', () => {
  assert.ok(EVENT_TYPES.includes('purchase'));
  assert.equal(EVENT_TYPES.length, 45);
  const event: EcapiEvent = { data_set_id: 'x', timestamp: 1, event_type: 'purchase', properties: { anything: 1 } };
  assert.equal(validateEvent(event), undefined);
});

test('sender-side validation words errors like the service', () => {
  const base = { data_set_id: 'x', timestamp: 1746558464, event_type: 'purchase' };
  assert.equal(validateEvent({ ...base, value: 1 })?.message, 'missing required field: currency_code');
  assert.equal(validateEvent({ ...base, event_type: 'custom' })?.message, 'missing required field: custom_event');
  assert.equal(validateEvent({ ...base, event_type: 'custom', custom_event: '' })?.message, 'invalid field custom_event: must not be empty');
  assert.equal(validateEvent({ data_set_id: 'x', event_type: 'purchase' })?.message, 'missing required field: timestamp');
  assert.equal(validateEvent({ ...base, timestamp: 1.5 })?.message, 'schema validation failed: timestamp must be integer');
  assert.equal(validateEvent({ ...base, foo: 1 })?.message, 'schema validation failed: unknown field foo');
  assert.equal(validateEvent({ ...base, user_data: { address: [{ zip: '1' }] } })?.message, 'schema validation failed: unknown field user_data.address[0].zip');
  assert.equal(validateEvent({ ...base, user_data: { event_ip_address: '1.2.3' } })?.message, 'invalid field user_data.event_ip_address: must be a valid IPv4 or IPv6 address');
  assert.equal(validateEvent({ ...base, user_data: { event_ip_address: '::1' } }), undefined);
  assert.equal(validateEvent({ ...base, user_data: { gender: 'F' } })?.message, 'hashed field user_data.gender is not a 64-char lowercase hex sha256');
  assert.equal(validateEvent({ ...base, source: 'tv' })?.message, 'schema validation failed: source must be one of "email", "website", "app", "phone_call", "chat", "physical_store", "system_generated", "business_messaging", "other", got "tv"');
  assert.equal(validateEvent([])?.message, 'schema validation failed: event must be a JSON object');
  // Codes come with the messages, and read back the same from a server's wire message.
  assert.deepEqual(validateEvent({ ...base, value: 1 }), { code: 'MISSING_FIELD', message: 'missing required field: currency_code' });
  assert.equal(validateEvent({ ...base, user_data: { gender: 'F' } })?.code, 'NOT_HASHED');
  assert.equal(validateEvent({ ...base, foo: 1 })?.code, 'SCHEMA');
  assert.equal(validateEvent({ ...base, user_data: { event_ip_address: '1.2.3' } })?.code, 'INVALID_FIELD');
  for (const problem of [validateEvent({ ...base, value: 1 }), validateEvent({ ...base, user_data: { gender: 'F' } }), validateEvent({ ...base, foo: 1 })]) {
    assert.deepEqual(eventErrorOf(problem!.message), problem);
  }
});
