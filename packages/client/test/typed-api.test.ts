/**
 * The typed API, checked by the compiler: this file is part of the build (tsc -b), and every
 * `@ts-expect-error` below must be an error, or the build fails ("Unused '@ts-expect-error'
 * directive"). So a misspelt event type or member, or an untyped record, cannot reach send().
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { prepareEvents, type Client, type EcapiEvent, type EventInput, type FailureCode, type RejectionCode } from '../src/index.js';

export async function compileTimeChecks(client: Client): Promise<void> {
  // data_set_id and id are filled in by the client: optional in the input.
  await client.send([{ timestamp: 1, event_type: 'purchase', value: 1, currency_code: 'USD' }]);
  // Plaintext identifiers (for hash: true) are accepted, single strings included.
  await client.send([{ timestamp: 1, event_type: 'generate_lead', user_data: { email_address: 'user@example.com' } }]);

  // @ts-expect-error a misspelt event type does not compile
  await client.send([{ timestamp: 1, event_type: 'purchse' }]);
  // @ts-expect-error a misspelt member does not compile
  await client.send([{ timestamp: 1, event_type: 'purchase', valu: 1 }]);
  // @ts-expect-error a misspelt member of user_data does not compile
  await client.send([{ timestamp: 1, event_type: 'purchase', user_data: { emails: ['x'] } }]);
  // @ts-expect-error an untyped record is not an event: no Record<string, unknown> escape hatch
  await client.send([{ timestamp: 1, event_type: 'purchase' } as Record<string, unknown>]);

  const result = await client.send([]);
  for (const r of result.results) {
    if (r.status === 'rejected') {
      const event: EcapiEvent = r.event; // typed, not unknown
      const code: RejectionCode = r.error.code;
      void [event.event_type, code, r.error.message];
      // @ts-expect-error the error is {code, message}, not a string to match by prefix
      void r.error.startsWith('schema');
    } else if (r.status === 'undeliverable') {
      const code: FailureCode = r.error.code;
      void [r.event.timestamp, code];
    }
  }
  if (result.failure) void (result.failure.code satisfies FailureCode);
}

test('typed inputs without data_set_id and id are completed by the client', () => {
  const input: EventInput = { timestamp: 1746558464, event_type: 'page_view' };
  const prep = prepareEvents([input], { dataSetId: 'shop', validate: false });
  assert.equal(prep.prepared[0]!.data_set_id, 'shop');
  assert.match(prep.prepared[0]!.id!, /^[0-9a-f]{8}-[0-9a-f]{4}-7/);
  assert.equal(typeof compileTimeChecks, 'function');
});
