/**
 * The published JSON Schema: valid 2020-12 for Ajv with formats (what senders use), named
 * $defs, and agreement between the published schema and the service on values the schema's
 * patterns and formats can judge.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsPlugin from 'ajv-formats';
import { loadEventSchema } from '@ecapi-ingest/protocol';
import { buildEventModel } from '../../src/validation/schema-model.js';
import { compileEventSchema, serverSchema } from '../../src/validation/event-processor.js';
import { H1, NOW, minimal, processor, policy } from './helpers.js';

const schema = loadEventSchema();
type FormatsPlugin = (ajv: InstanceType<typeof Ajv2020>) => unknown;
const addFormats = ((addFormatsPlugin as unknown as { default?: FormatsPlugin }).default ?? (addFormatsPlugin as unknown as FormatsPlugin));

function publishedValidator() {
  const ajv = new Ajv2020({ strict: true, allErrors: false });
  addFormats(ajv);
  return ajv.compile(schema);
}

test('the published schema is 2020-12 with the named $defs', () => {
  assert.equal(schema['$schema'], 'https://json-schema.org/draft/2020-12/schema');
  const defs = Object.keys(schema['$defs'] as object);
  for (const name of ['Event', 'UserData', 'Uid', 'Address', 'Item', 'Properties']) assert.ok(defs.includes(name), name);
});

test('the published schema compiles in strict mode with ajv-formats (as senders use it)', () => {
  assert.equal(typeof publishedValidator(), 'function');
});

test('unknown members: rejected in Event, UserData, Uid, Address, Item; accepted in Properties and every ext', () => {
  const model = buildEventModel(schema);
  const closed = (name: string): boolean => {
    const seen: string[] = [];
    const visit = (o: typeof model.event): boolean | undefined => {
      if (o.name === name) return o.closed;
      if (seen.includes(o.name)) return undefined;
      seen.push(o.name);
      for (const f of o.fields.values()) {
        const sub = f.object ?? f.items?.object;
        if (sub !== undefined) { const r = visit(sub); if (r !== undefined) return r; }
      }
      return undefined;
    };
    return visit(model.event)!;
  };
  for (const name of ['Event', 'UserData', 'Uid', 'Address', 'Item']) assert.equal(closed(name), true, name);
  assert.equal(closed('Properties'), false);
  const defs = schema['$defs'] as Record<string, { properties?: Record<string, { $ref?: string }> }>;
  for (const name of ['Event', 'UserData', 'Uid', 'Address', 'Item', 'Properties']) {
    assert.equal(defs[name]!.properties!['ext']!.$ref, '#/$defs/Ext', `${name}.ext`);
  }
});

test('the walker refuses a schema keyword it does not implement', () => {
  const copy = structuredClone(schema) as { $defs: Record<string, { properties: Record<string, Record<string, unknown>> }> };
  copy.$defs['Item']!.properties['name']!['maxLength'] = 10;
  assert.throws(() => buildEventModel(copy as unknown as Record<string, unknown>), /keyword "maxLength" at Item.name/);
});

test('the server copy of the schema keeps types and enums but drops the patterns the walker enforces', () => {
  const copy = serverSchema(schema) as { $defs: Record<string, Record<string, unknown>> };
  assert.equal(copy.$defs['Sha256Hex']!['pattern'], undefined);
  assert.equal((schema['$defs'] as Record<string, Record<string, unknown>>)['Sha256Hex']!['pattern'], '^[0-9a-f]{64}$');
  const validate = compileEventSchema(schema);
  assert.equal(validate(minimal({ source: 'nope' })), false);
  assert.equal(validate(minimal({ user_data: { gender: 'f' } })), true); // left to the walker
});

// Values the published schema's patterns/formats judge: the service must agree with a sender
// validating with the published schema, or be stricter (never laxer).
const AGREEMENT: ReadonlyArray<readonly [string, Record<string, unknown>]> = [
  ['hash ok', { user_data: { gender: H1 } }],
  ['hash upper', { user_data: { gender: H1.toUpperCase() } }],
  ['ipv4', { user_data: { event_ip_address: '192.0.2.1' } }],
  ['ipv4 leading zero', { user_data: { event_ip_address: '192.0.2.01' } }],
  ['ipv6', { user_data: { event_ip_address: '2001:db8::1' } }],
  ['ipv6 mapped', { user_data: { event_ip_address: '::ffff:192.0.2.1' } }],
  ['ip garbage', { user_data: { event_ip_address: 'localhost' } }],
  ['url ok', { properties: { page_url: 'https://a.example/x?y=1' } }],
  ['url relative', { properties: { page_url: 'a.example/x' } }],
  ['url no host', { properties: { page_url: 'http://' } }],
  ['date compact', { properties: { arrival_date: '20250101' } }],
  ['date dashed', { properties: { arrival_date: '2025-01-01' } }],
  ['date mixed', { properties: { arrival_date: '2025-0101' } }],
  ['currency', { value: 1, currency_code: 'EUR' }],
  ['currency lower', { value: 1, currency_code: 'eur' }],
  ['country', { user_data: { address: [{ country_code: 'fr' }] } }],
  ['country 3', { user_data: { address: [{ country_code: 'fra' }] } }],
  ['utcoffset', { user_data: { utcoffset: 900 } }],
  ['custom empty', { event_type: 'custom', custom_event: '' }],
];
for (const [name, extra] of AGREEMENT) {
  test(`published schema and service agree or the service is stricter: ${name}`, () => {
    const event = minimal(extra);
    const bySchema = publishedValidator()(structuredClone(event));
    const byService = processor.check(structuredClone(event), { nowSeconds: NOW, policy: policy() }).ok;
    if (!bySchema) assert.equal(byService, false, 'service accepted what the published schema rejects');
  });
}
