/**
 * The test environment's display copies (live/event-display.ts): what a rejected event,
 * which no policy has checked, may show, and what it may never show.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { displayedEventId, eventForDisplay, eventIdForDisplay, MAX_EVENT_CHARS, rejectedEventForDisplay } from '../../src/live/event-display.js';

const HASH = 'b4c9a289323b21a01c3e940f150eb9b8c542587f1abfd8f0e1cc1ffc5e475514';

test('a rejected event shows its known fields and masks every identifier, unknown name and secret', () => {
  const raw = {
    id: 'evt-1',
    event_type: 'purchase',
    value: 'nineteen',
    user_data: {
      email_address: ['mary@example.com', HASH],
      phone_numbers: [15551234567],
      address: [{ city: 'Springfield', country_code: 'US', 'bob@example.com': 'x' }],
      event_ip_address: '203.0.113.7',
      utcoffset: -300,
    },
    'joe@example.com': { nested: 'sk-SECRET' },
    ext: { token: 'sk-OTHER' },
    properties: { lead_source: 'from ann@example.com', items: [{ name: 'Shoe', ext: { a: 'b' } }] },
  };
  const shown = rejectedEventForDisplay(raw).event as Record<string, any>;
  const text = JSON.stringify(shown);
  for (const secret of ['mary@', 'bob@', 'joe@', 'ann@', '15551234567', 'Springfield', '203.0.113.7', 'sk-SECRET', 'sk-OTHER']) {
    assert.ok(!text.includes(secret), `${secret} masked: ${text}`);
  }
  assert.equal(shown.id, 'evt-1');
  assert.equal(shown.value, 'nineteen', 'a wrong value outside user_data is what the sender must see');
  assert.deepEqual(shown.user_data.email_address, ['‹not shown: 16 characters›', HASH]);
  assert.deepEqual(shown.user_data.phone_numbers, ['‹not shown: number›']);
  assert.equal(shown.user_data.address[0].country_code, 'US');
  assert.equal(shown.user_data.utcoffset, -300);
  assert.deepEqual(shown['‹unknown field 1›'], { '‹unknown field 1›': '‹not shown: 9 characters›' });
  assert.deepEqual(shown['‹unknown field 2›'], { '‹unknown field 1›': '‹not shown: 8 characters›' }, 'ext is never shown');
  assert.equal(shown.properties.lead_source, 'from [redacted-email]');
  assert.equal(shown.properties.items[0].name, 'Shoe');
  assert.deepEqual(shown.properties.items[0]['‹unknown field 1›'], { '‹unknown field 1›': '‹not shown: 1 character›' });
});

test('a rejected event that is not an object is masked too; a large one is not kept', () => {
  assert.deepEqual(rejectedEventForDisplay('mary@example.com'), { event: '[redacted-email]' });
  assert.deepEqual(rejectedEventForDisplay([1, { a: 'b' }]), { event: [1, { '‹unknown field 1›': '‹not shown: 1 character›' }] });
  assert.deepEqual(rejectedEventForDisplay(undefined), {});
  const large = rejectedEventForDisplay({ id: 'x', properties: { search_term: 'a'.repeat(MAX_EVENT_CHARS) } });
  assert.equal(large.event, undefined);
  assert.match(large.event_omitted ?? '', /larger than 32 KB/);
});

test('an accepted event (as queued) keeps everything but the non-digest strings of user_data', () => {
  const shown = eventForDisplay({ id: 'e', user_data: { email_address: [HASH], event_user_agent: 'Mozilla/5.0' }, properties: { page_url: 'https://x.test/' } }).event as Record<string, any>;
  assert.deepEqual(shown, { id: 'e', user_data: { email_address: [HASH], event_user_agent: '‹not shown: 11 characters›' }, properties: { page_url: 'https://x.test/' } });
});

test('identifiers are masked wherever they appear: a user_data value repeated elsewhere, an email or + phone as the id (issue 29)', () => {
  const accepted = {
    id: 'jo@example.com',
    event_type: 'purchase',
    user_data: { email_address: [HASH], event_ip_address: '203.0.113.9', event_user_agent: 'Mozilla/5.0 (X11)' },
    properties: { client_ip: '203.0.113.9', note: 'mail jo@example.com', items: [{ name: 'Shoe', price: 10 }] },
  };
  const text = JSON.stringify(eventForDisplay(accepted).event);
  for (const secret of ['jo@example.com', '203.0.113.9', 'Mozilla']) assert.ok(!text.includes(secret), `${secret} masked: ${text}`);
  assert.ok(text.includes('Shoe') && text.includes(HASH), text);
  assert.equal(eventIdForDisplay(accepted), '‹not shown: 14 characters›');
  // The same in a rejected event; its id repeating its plain customer id.
  const rejected = { id: 'C-4411', user_data: { customer_identifier: 'c-4411' } };
  assert.equal((rejectedEventForDisplay(rejected).event as { id: string }).id, '‹not shown: 6 characters›');
  assert.equal(eventIdForDisplay(rejected), '‹not shown: 6 characters›');
  // Shapes: + phone numbers masked; ids of digits alone, UUIDs and short values kept.
  assert.equal(displayedEventId('+44 20 7946 0958'), '‹not shown: 16 characters›');
  for (const id of ['1700000000123', '3f1c2a9e-8b1d-4c2e-9f0a-1b2c3d4e5f60', 'order-17', null]) assert.equal(displayedEventId(id), id);
});
