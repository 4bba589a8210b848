/**
 * Every per-event rejection the server produces is `{code, message}` data whose code is in the
 * one registry (@ecapi-ingest/protocol: EventErrors) and whose message is that code's template
 * filled in, the text senders see in `errors[].error`. Rejections are produced by every producer:
 * the walker (a fuzzed corpus of mutated events, fast-check), Ajv's fallback, the privacy policy
 * (consent and plaintext-email refusals) and the request path's own two rejections.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { EventErrors, eventErrorOf, type EventError, type EventErrorCode } from '@ecapi-ingest/protocol';
import { DATA_SET_MISMATCH, NOT_AN_OBJECT } from '../../src/http/events-request.js';
import { ajvEventError, compileEventSchema } from '../../src/validation/event-processor.js';
import type { EventOutcome } from '../../src/events/event-outcome.js';
import { rejectionReasonOf } from '../../src/observability/service-metrics.js';
import { loadEventSchema } from '@ecapi-ingest/protocol';
import { H1, NOW, TS, gpp, minimal, policy, processor } from './helpers.js';

const MARK = '\u0000';

/** The template of a code as a pattern: its fixed text literally, each argument any non-empty text. */
function templatePattern(code: EventErrorCode): RegExp {
  const sample = (EventErrors[code].message as (...args: string[]) => string)(MARK, MARK);
  const fixed = sample.split(MARK).map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  return new RegExp(`^${fixed.join('(.+)')}$`, 's');
}

const seen = new Map<string, number>();

function assertRegistered(error: EventError, what: string): void {
  assert.ok(Object.hasOwn(EventErrors, error.code), `${what}: code ${error.code} is in the registry`);
  const code = error.code as EventErrorCode;
  assert.match(error.message, templatePattern(code), `${what}: message of ${code} matches its template`);
  // The wire text reads back as the same code (the SDK's reading of a response).
  assert.equal(eventErrorOf(error.message).code, code, `${what}: ${error.message}`);
  assert.notEqual(rejectionReasonOf(code), 'other', `${what}: ${code} has a metric label`);
  seen.set(code, (seen.get(code) ?? 0) + 1);
}

function rejection(outcome: EventOutcome): EventError | undefined {
  return outcome.ok ? undefined : outcome.error;
}

const context = (overrides: Parameters<typeof policy>[0] = {}) => ({ nowSeconds: NOW, policy: policy(overrides) });

const FULL = (): Record<string, unknown> =>
  minimal({
    id: 'e-1',
    source: 'website',
    value: 10,
    currency_code: 'USD',
    user_data: { email_address: [H1], address: [{ country_code: 'us', postal_code: H1 }], event_ip_address: '203.0.113.7', utcoffset: 60 },
    properties: { page_url: 'https://example.com/p', items: [{ id: 'sku', quantity: 1 }], arrival_date: '2025-11-21' },
  });

const FIELDS = ['data_set_id', 'timestamp', 'event_type', 'id', 'source', 'value', 'currency_code', 'custom_event', 'user_data', 'properties', 'zzz'];
const USER_FIELDS = ['email_address', 'address', 'event_ip_address', 'utcoffset', 'gpp_string', 'gpp_sid', 'customer_identifier', 'uids', 'nick'];
const values = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }),
  fc.constantFrom('', 'custom', 'USD', 'usd', 'XXX', 'purchase', 'not-a-url', '999.1.1.1', '2025-02-30', 'mary@example.com', H1, H1.toUpperCase(), [H1, 'x'], TS + 10_000, TS - 10_000_000, null),
);

test('every rejection the validator and policy produce is registered and worded by its template (fuzzed)', () => {
  fc.assert(
    fc.property(
      fc.array(
        fc.oneof(
          fc.record({ at: fc.constant('event'), field: fc.constantFrom(...FIELDS), value: values, drop: fc.boolean() }),
          fc.record({ at: fc.constant('user_data'), field: fc.constantFrom(...USER_FIELDS), value: values, drop: fc.boolean() }),
        ),
        { minLength: 1, maxLength: 4 },
      ),
      (mutations) => {
        const event = FULL();
        for (const m of mutations) {
          const target = m.at === 'event' ? event : (event['user_data'] as Record<string, unknown> | undefined);
          if (target === null || typeof target !== 'object' || Array.isArray(target)) continue;
          if (m.drop) delete target[m.field];
          else target[m.field] = m.value;
        }
        const outcome = processor.evaluate(structuredClone(event), context());
        const error = rejection(outcome);
        if (error !== undefined) assertRegistered(error, JSON.stringify(mutations));
        // check() is the same outcome with the message alone.
        const checked = processor.check(structuredClone(event), context());
        assert.deepEqual(checked, outcome.ok ? checked : { ok: false, error: error!.message });
      },
    ),
    { numRuns: 1500, seed: 18 },
  );
  for (const code of ['SCHEMA', 'MISSING_FIELD', 'INVALID_FIELD', 'NOT_HASHED']) assert.ok(seen.has(code), `the corpus produced ${code}`);
});

test('Ajv\'s fallback, the privacy refusals and the request path\'s own rejections are registered too', () => {
  const validate = compileEventSchema(loadEventSchema());
  const ajvCases: unknown[] = [
    {}, [], 'x', minimal({ zzz: 1 }), minimal({ source: 5 }), minimal({ event_type: 'nope' }), minimal({ user_data: { address: [{ nick: 1 }] } }),
    { data_set_id: 'ds_1', event_type: 'purchase' }, minimal({ value: 'ten' }), minimal({ properties: { items: [{ quantity: 'x' }] } }),
  ];
  for (const event of ajvCases) {
    assert.equal(validate(event), false, JSON.stringify(event));
    assertRegistered(ajvEventError(validate.errors![0]!), `ajv ${JSON.stringify(event)}`);
  }

  const optOut = gpp({ usnat: { SaleOptOut: 1, SharingOptOut: 1, TargetedAdvertisingOptOut: 1 } });
  const consent = rejection(processor.evaluate(minimal({ user_data: { gpp_string: optOut, gpp_sid: [7] } }), context({ consent: 'reject' })));
  assert.equal(consent?.code, 'INVALID_FIELD');
  assertRegistered(consent!, 'consent refusal');

  const email = rejection(processor.evaluate(minimal({ properties: { note: 'write to mary@example.com' } }), context({ piiScan: 'reject' })));
  assert.equal(email?.code, 'INVALID_FIELD');
  assertRegistered(email!, 'plaintext email refusal');

  assertRegistered(NOT_AN_OBJECT, 'request path: not an object');
  assertRegistered(DATA_SET_MISMATCH, 'request path: data set mismatch');
  assert.deepEqual(NOT_AN_OBJECT, { code: 'SCHEMA', message: 'schema validation failed: event must be a JSON object' });
  assert.deepEqual(DATA_SET_MISMATCH, { code: 'INVALID_FIELD', message: 'invalid field data_set_id: must equal X-Service-Data-Set' });
});

test('a template pattern rejects text of another shape (the check above can fail)', () => {
  assert.doesNotMatch('invalid field data_set_id must equal', templatePattern('INVALID_FIELD'));
  assert.doesNotMatch('hashed field x is not hex', templatePattern('NOT_HASHED'));
  assert.match(EventErrors.NOT_HASHED.message('user_data.email_address[0]'), templatePattern('NOT_HASHED'));
  assert.deepEqual(EventErrors.MISSING_FIELD.error('timestamp'), { code: 'MISSING_FIELD', message: 'missing required field: timestamp' });
});
