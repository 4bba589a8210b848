/**
 * Table-driven tests of EventProcessor.check(): every field, enumeration, conditional rule,
 * hash rule, format, the null rule, unknown members and the order of errors. Each case asserts
 * the exact error string or the exact accepted output (event and meta).
 */
import { test } from 'node:test';
import { loadEventSchema } from '@ecapi-ingest/protocol';
import { H1, H2, H3, NOW, TS, gpp, minimal, runCase, sha } from './helpers.js';
import type { Case } from './helpers.js';

const S = 'schema validation failed: ';
const NOT_HASHED = (field: string): string => `hashed field ${field} is not a 64-char lowercase hex sha256`;
const defs = (loadEventSchema() as unknown as { $defs: Record<string, { enum?: unknown[]; properties?: Record<string, { enum?: string[] }> }> }).$defs;

const STANDARD_EVENTS = ['purchase', 'page_view', 'ad_impression', 'add_to_wishlist', 'add_to_cart', 'viewed_cart',
  'viewed_item', 'begin_checkout', 'add_payment_info', 'remove_from_cart', 'refund', 'generate_lead', 'qualify_lead',
  'close_convert_lead', 'disqualify_lead', 'close_unconvert_lead', 'sign_up', 'search', 'unlock_achievement', 'install',
  'customize_product', 'contact', 'donate', 'find_location', 'schedule', 'start_trial', 'subscribe'];
const ADDITIONAL_EVENTS = ['add_shipping_info', 'share', 'select_content', 'select_item', 'select_promotion',
  'view_item_list', 'view_promotion', 'view_search_results', 'spend_virtual_currency', 'earn_virtual_currency',
  'working_lead', 'login', 'join_group', 'level_up', 'post_score', 'tutorial_begin', 'tutorial_complete'];
const SOURCES = ['email', 'website', 'app', 'phone_call', 'chat', 'physical_store', 'system_generated', 'business_messaging', 'other'];
const PROPERTY_ENUMS: Record<string, string[]> = {
  availability: ['available soon', 'for rent', 'for sale', 'off market', 'recently sold', 'sale pending'],
  body_style: ['convertible', 'coupe', 'hatchback', 'minivan', 'truck', 'suv', 'sedan', 'van', 'wagon', 'crossover', 'other'],
  condition_of_vehicle: ['new', 'used'],
  drivetrain: ['4x2', '4x4', 'awd', 'fwd', 'rwd', 'other', 'none'],
  fuel_type: ['diesel', 'electric', 'flex', 'gasoline', 'hybrid', 'petrol', 'plugin_hybrid', 'other', 'none'],
  listing_type: ['for rent by agent', 'for rent by owner', 'for sale by agent', 'for sale by owner', 'foreclosed', 'new construction', 'new listing'],
  transmission: ['automatic', 'manual', 'other', 'none'],
};

const ud = (user_data: Record<string, unknown>): Record<string, unknown> => minimal({ user_data });
const props = (properties: Record<string, unknown>): Record<string, unknown> => minimal({ properties });
const addr = (a: Record<string, unknown>): Record<string, unknown> => ud({ address: [a] });
const US_GPP = gpp({ usnat: { SaleOptOut: 2, SharingOptOut: 2, TargetedAdvertisingOptOut: 2 } });

const FULL = {
  data_set_id: 'ds_1',
  id: 'evt-1',
  timestamp: TS,
  event_type: 'purchase',
  custom_event: 'ignored-for-purchase',
  user_data: {
    customer_identifier: H1,
    uids: [{ id: H2, source: 'uidapi.com', atype: 3, ext: { rtiPartner: 'TDID' } }],
    customer_segments: ['gold member'],
    email_address: [H1, sha('other@example.com')],
    phone_numbers: [H2],
    utcoffset: -300,
    address: [{ first_name: H3, last_name: sha('doe'), street: sha('1 main st'), city: 'new york', state: 'ny', country_code: 'us', postal_code: sha('10001'), address_type: 'billing', ext: {} }],
    gpp_string: US_GPP,
    gpp_sid: [7],
    mmt_only: false,
    click_id: 'clk',
    impression_id: 'imp',
    event_ip_address: '203.0.113.7',
    event_user_agent: 'Mozilla/5.0',
    ifa: '6D92078A-8246-4BA4-AE5B-76104861E7DC',
    landing_ip_address: '2001:db8::1',
    landing_user_agent: 'Mozilla/5.0',
    age_range: 4,
    gender: sha('f'),
    ext: { anything: [1, null, { deep: true }] },
  },
  value: 12.5,
  currency_code: 'EUR',
  source: 'website',
  properties: {
    transaction_id: 't1', page_url: 'https://shop.example/p?q=1', ad_source: 'news', referrer: 'https://google.com/',
    coupon: ['A', 'B'], shipping: 1.5, tax: 2, payment_type: ['card'], shipping_tier: 'ground',
    virtual_currency_name: 'gems', virtual_item_name: 'sword', lead_source: 'web', lead_status: 'new', lead_reason: 'r',
    ad_platform: 'p', ad_format: 'f', ad_unit_name: 'u', login_method: 'sso', group_id: 'g', character_level: 3,
    character: 'elf', post_score: 100, achievement_id: 'a1', search_term: 'shoes', creative_name: 'c', creative_slot: 's',
    promotion_id: 'p1', promotion_name: 'spring', availability: 'for sale', body_style: 'suv', condition_of_vehicle: 'used',
    arrival_date: '20250301', departure_date: '2025-03-05', destination_airport: 'JFK', destination_ids: 'd1',
    drivetrain: 'awd', exterior_color: 'red', fuel_type: 'plugin_hybrid', lease_end_date: '2026-01-31',
    lease_start_date: '20250201', listing_type: 'for rent by agent', make: 'acme', model: 'x', transmission: 'manual',
    vin: '1HGCM82633A004352',
    items: [
      { id: 'SKU-1', name: 'Shoe', price: 10, discount: 1, quantity: 1.5, brand: 'b', affiliation: 'store', category: 'c',
        cattax: 8, item_coupon: 'ic', item_list_id: 'l', item_list_name: 'ln', item_item_variant: 'v', item_location_id: 'loc', ext: {} },
      { id: 'SKU-2', price: 0 },
      { id: 'SKU-3', price: 5.25, quantity: 2 },
    ],
    custom_member: { free: 'form', n: null },
    ext: { x: 1 },
  },
  ext: { partner: { a: 1 } },
};

const cases: Case[] = [
  // ---- the whole event
  { name: 'full event with every ECAPI field is accepted unchanged', event: FULL, expect: 'unchanged' },
  { name: 'minimal event is accepted unchanged', event: minimal(), expect: 'unchanged' },
  { name: 'event that is an array', event: [minimal()], expect: `${S}event must be a JSON object` },
  { name: 'event that is null', event: null, expect: `${S}event must be a JSON object` },
  { name: 'event that is a string', event: 'purchase', expect: `${S}event must be a JSON object` },

  // ---- required fields
  { name: 'missing data_set_id', event: { timestamp: TS, event_type: 'purchase' }, expect: 'missing required field: data_set_id' },
  { name: 'missing timestamp', event: { data_set_id: 'ds_1', event_type: 'purchase' }, expect: 'missing required field: timestamp' },
  { name: 'missing event_type', event: { data_set_id: 'ds_1', timestamp: TS }, expect: 'missing required field: event_type' },
  { name: 'all required missing: data_set_id reported first', event: {}, expect: 'missing required field: data_set_id' },
  { name: 'null data_set_id counts as missing', event: minimal({ data_set_id: null }), expect: 'missing required field: data_set_id' },
  { name: 'null timestamp counts as missing', event: minimal({ timestamp: null }), expect: 'missing required field: timestamp' },
  { name: 'null event_type counts as missing', event: minimal({ event_type: null }), expect: 'missing required field: event_type' },
  { name: 'empty data_set_id', event: minimal({ data_set_id: '' }), expect: 'invalid field data_set_id: must be a non-empty string' },
  { name: 'numeric data_set_id', event: minimal({ data_set_id: 7 }), expect: `${S}data_set_id must be a string` },

  // ---- timestamp
  { name: 'timestamp as a string', event: minimal({ timestamp: String(TS) }), expect: `${S}timestamp must be an integer` },
  { name: 'fractional timestamp', event: minimal({ timestamp: TS + 0.5 }), expect: `${S}timestamp must be an integer` },
  { name: 'timestamp 1e400 (Infinity)', event: minimal({ timestamp: Infinity }), expect: `${S}timestamp must be an integer` },
  { name: 'timestamp in milliseconds', event: minimal({ timestamp: TS * 1000 }), expect: 'invalid field timestamp: looks like milliseconds; send unix seconds' },
  { name: 'timestamp 301 s in the future', event: minimal({ timestamp: NOW + 301 }), expect: 'invalid field timestamp: is more than 5 minutes in the future; send the event time in unix seconds (UTC)' },
  { name: 'timestamp exactly 300 s in the future', event: minimal({ timestamp: NOW + 300 }), expect: 'unchanged' },
  { name: 'timestamp older than maxAgeSeconds', event: minimal({ timestamp: NOW - 90 * 86400 - 1 }), expect: 'invalid field timestamp: is older than this data set accepts (maximum event age 90 days)' },
  { name: 'timestamp exactly maxAgeSeconds old', event: minimal({ timestamp: NOW - 90 * 86400 }), expect: 'unchanged' },
  { name: 'timestamp older than a per-data-set maxAgeSeconds', event: minimal({ timestamp: NOW - 7201 }), policy: { maxAgeSeconds: 7200 }, expect: 'invalid field timestamp: is older than this data set accepts (maximum event age 2 hours)' },
  { name: 'negative timestamp', event: minimal({ timestamp: -1 }), expect: 'invalid field timestamp: is older than this data set accepts (maximum event age 90 days)' },

  // ---- event_type and custom_event
  ...[...STANDARD_EVENTS, ...ADDITIONAL_EVENTS].map((t): Case => ({ name: `event_type ${t} accepted`, event: minimal({ event_type: t }), expect: 'unchanged' })),
  { name: 'misspelt event_type', event: minimal({ event_type: 'purchse' }), expect: `${S}event_type must be one of the ECAPI 1.0 event types, got "purchse"` },
  { name: 'event_type in the wrong case', event: minimal({ event_type: 'Purchase' }), expect: `${S}event_type must be one of the ECAPI 1.0 event types, got "Purchase"` },
  { name: 'numeric event_type', event: minimal({ event_type: 1 }), expect: `${S}event_type must be a string` },
  { name: 'long unknown event_type is truncated in the message', event: minimal({ event_type: 'x'.repeat(60) }), expect: `${S}event_type must be one of the ECAPI 1.0 event types, got "${'x'.repeat(40)}…"` },
  { name: 'custom without custom_event', event: minimal({ event_type: 'custom' }), expect: 'missing required field: custom_event' },
  { name: 'custom with null custom_event', event: minimal({ event_type: 'custom', custom_event: null }), expect: 'missing required field: custom_event' },
  { name: 'custom with empty custom_event', event: minimal({ event_type: 'custom', custom_event: '' }), expect: 'invalid field custom_event: must be a non-empty string when event_type is "custom"' },
  { name: 'custom with custom_event', event: minimal({ event_type: 'custom', custom_event: 'quote_requested' }), expect: 'unchanged' },
  { name: 'custom_event with a wrong type is reported at its position', event: { custom_event: 5, data_set_id: 'ds_1', timestamp: TS, event_type: 'custom' }, expect: `${S}custom_event must be a string` },
  { name: 'custom_event is ignored (kept) when event_type is not custom', event: minimal({ custom_event: '' }), expect: 'unchanged' },

  // ---- value and currency_code
  { name: 'value without currency_code', event: minimal({ value: 10 }), expect: 'missing required field: currency_code' },
  { name: 'value with null currency_code', event: minimal({ value: 10, currency_code: null }), expect: 'missing required field: currency_code' },
  { name: 'null value needs no currency_code and is removed', event: minimal({ value: null }), expect: { event: minimal() } },
  { name: 'value 1e400 (Infinity)', event: minimal({ value: Infinity, currency_code: 'USD' }), expect: `${S}value must be a finite number` },
  { name: 'value as a string', event: minimal({ value: '10.00', currency_code: 'USD' }), expect: `${S}value must be a finite number` },
  { name: 'negative value (refund) accepted', event: minimal({ event_type: 'refund', value: -5.5, currency_code: 'USD' }), expect: 'unchanged' },
  { name: 'currency_code without value accepted', event: minimal({ currency_code: 'JPY' }), expect: 'unchanged' },
  { name: 'lowercase currency_code', event: minimal({ value: 1, currency_code: 'usd' }), expect: 'invalid field currency_code: ISO 4217 codes are uppercase: send "USD"' },
  { name: 'unknown currency_code', event: minimal({ value: 1, currency_code: 'ABC' }), expect: 'invalid field currency_code: must be an active ISO 4217 currency code, e.g. "USD"' },
  { name: 'XXX (no currency) rejected', event: minimal({ value: 1, currency_code: 'XXX' }), expect: 'invalid field currency_code: must be an active ISO 4217 currency code, e.g. "USD"' },
  { name: 'withdrawn HRK rejected', event: minimal({ value: 1, currency_code: 'HRK' }), expect: 'invalid field currency_code: must be an active ISO 4217 currency code, e.g. "USD"' },
  { name: 'numeric currency_code', event: minimal({ value: 1, currency_code: 840 }), expect: `${S}currency_code must be a string` },
  { name: 'currency_code XCG (2025) accepted', event: minimal({ value: 1, currency_code: 'XCG' }), expect: 'unchanged' },

  // ---- source, id, ext, unknown members
  ...SOURCES.map((s): Case => ({ name: `source ${s} accepted`, event: minimal({ source: s }), expect: 'unchanged' })),
  { name: 'unknown source', event: minimal({ source: 'web' }), expect: `${S}source must be one of "email", "website", "app", "phone_call", "chat", "physical_store", "system_generated", "business_messaging", "other", got "web"` },
  { name: 'numeric id', event: minimal({ id: 42 }), expect: `${S}id must be a string` },
  { name: 'unknown core field', event: minimal({ foo: 1 }), expect: `${S}unknown field foo` },
  { name: 'unknown core field with null value is still unknown', event: minimal({ foo: null }), expect: `${S}unknown field foo` },
  { name: 'unknown core field with an odd name', event: minimal({ 'a.b c': 1 }), expect: `${S}unknown field ["a.b c"]` },
  { name: 'core ext accepts anything (nulls inside kept)', event: minimal({ ext: { a: null, b: [1, 'x'] } }), expect: 'unchanged' },
  { name: 'core ext that is an array', event: minimal({ ext: [1] }), expect: `${S}ext must be an object` },
  { name: 'null ext is removed', event: minimal({ ext: null }), expect: { event: minimal() } },

  // ---- user_data
  { name: 'user_data that is an array', event: minimal({ user_data: [] }), expect: `${S}user_data must be an object` },
  { name: 'unknown user_data field', event: ud({ email: 'x' }), expect: `${S}unknown field user_data.email` },
  { name: 'customer_identifier uppercase hex', event: ud({ customer_identifier: H1.toUpperCase() }), expect: NOT_HASHED('user_data.customer_identifier') },
  { name: 'customer_identifier plaintext', event: ud({ customer_identifier: 'cust-1' }), expect: NOT_HASHED('user_data.customer_identifier') },
  { name: 'customer_identifier 63 chars', event: ud({ customer_identifier: H1.slice(1) }), expect: NOT_HASHED('user_data.customer_identifier') },
  { name: 'customer_identifier 65 chars', event: ud({ customer_identifier: `${H1}0` }), expect: NOT_HASHED('user_data.customer_identifier') },
  { name: 'customer_identifier non-hex letter', event: ud({ customer_identifier: `${H1.slice(0, 63)}g` }), expect: NOT_HASHED('user_data.customer_identifier') },
  { name: 'customer_identifier as a number', event: ud({ customer_identifier: 5 }), expect: `${S}user_data.customer_identifier must be a string` },
  { name: 'email_address as a bare string', event: ud({ email_address: H1 }), expect: `${S}user_data.email_address must be an array of SHA-256 hex strings` },
  { name: 'email_address second entry not hashed', event: ud({ email_address: [H1, 'user@example.com'] }), expect: NOT_HASHED('user_data.email_address[1]') },
  { name: 'email_address with a null entry', event: ud({ email_address: [null] }), expect: `${S}user_data.email_address[0] must be a string` },
  { name: 'empty email_address array accepted', event: ud({ email_address: [] }), expect: 'unchanged' },
  { name: 'phone_numbers entry uppercase', event: ud({ phone_numbers: [H2.toUpperCase()] }), expect: NOT_HASHED('user_data.phone_numbers[0]') },
  { name: 'phone_numbers plaintext', event: ud({ phone_numbers: ['+12125550000'] }), expect: NOT_HASHED('user_data.phone_numbers[0]') },
  { name: 'gender plaintext', event: ud({ gender: 'f' }), expect: NOT_HASHED('user_data.gender') },
  { name: 'customer_segments as a string', event: ud({ customer_segments: 'gold' }), expect: `${S}user_data.customer_segments must be an array of strings` },
  { name: 'customer_segments with a number', event: ud({ customer_segments: ['a', 1] }), expect: `${S}user_data.customer_segments[1] must be a string` },
  { name: 'utcoffset 841', event: ud({ utcoffset: 841 }), expect: 'invalid field user_data.utcoffset: must be minutes from UTC between -720 and 840' },
  { name: 'utcoffset -721', event: ud({ utcoffset: -721 }), expect: 'invalid field user_data.utcoffset: must be minutes from UTC between -720 and 840' },
  { name: 'utcoffset 840 accepted', event: ud({ utcoffset: 840 }), expect: 'unchanged' },
  { name: 'utcoffset -720 accepted', event: ud({ utcoffset: -720 }), expect: 'unchanged' },
  { name: 'utcoffset 5.5', event: ud({ utcoffset: 5.5 }), expect: `${S}user_data.utcoffset must be an integer` },
  { name: 'mmt_only as a string', event: ud({ mmt_only: 'true' }), expect: `${S}user_data.mmt_only must be true or false` },
  { name: 'mmt_only true accepted', event: ud({ mmt_only: true }), expect: 'unchanged' },
  { name: 'event_ip_address not an IP', event: ud({ event_ip_address: '999.1.1.1' }), expect: 'invalid field user_data.event_ip_address: must be a valid IPv4 or IPv6 address' },
  { name: 'event_ip_address with a zone index', event: ud({ event_ip_address: 'fe80::1%eth0' }), expect: 'invalid field user_data.event_ip_address: must be an IPv6 address without a zone index (%...)' },
  { name: 'event_ip_address IPv6 accepted', event: ud({ event_ip_address: '2001:db8:85a3::8a2e:370:7334' }), expect: 'unchanged' },
  { name: 'landing_ip_address with a port', event: ud({ landing_ip_address: '203.0.113.7:443' }), expect: 'invalid field user_data.landing_ip_address: must be a valid IPv4 or IPv6 address' },
  { name: 'age_range 14', event: ud({ age_range: 14 }), expect: `${S}user_data.age_range must be an integer from 1 to 13 (ECAPI age_range), got 14` },
  { name: 'age_range 0', event: ud({ age_range: 0 }), expect: `${S}user_data.age_range must be an integer from 1 to 13 (ECAPI age_range), got 0` },
  { name: 'age_range as a string', event: ud({ age_range: '3' }), expect: `${S}user_data.age_range must be an integer from 1 to 13 (ECAPI age_range)` },
  ...Array.from({ length: 13 }, (_, i): Case => ({ name: `age_range ${i + 1} accepted`, event: ud({ age_range: i + 1 }), expect: 'unchanged' })),
  { name: 'user_data.ext accepts anything', event: ud({ ext: { k: 'v' } }), expect: 'unchanged' },

  // ---- uids
  { name: 'uids id not hashed', event: ud({ uids: [{ id: 'abc', atype: 1 }] }), expect: NOT_HASHED('user_data.uids[0].id') },
  { name: 'uids second id uppercase', event: ud({ uids: [{ id: H1 }, { id: H2.toUpperCase() }] }), expect: NOT_HASHED('user_data.uids[1].id') },
  { name: 'uids unknown field', event: ud({ uids: [{ id: H1, type: 'x' }] }), expect: `${S}unknown field user_data.uids[0].type` },
  { name: 'uids atype fractional', event: ud({ uids: [{ id: H1, atype: 1.5 }] }), expect: `${S}user_data.uids[0].atype must be an integer` },
  { name: 'uids as an object', event: ud({ uids: { id: H1 } }), expect: `${S}user_data.uids must be an array of uid objects` },
  { name: 'uids entry that is a string', event: ud({ uids: [H1] }), expect: `${S}user_data.uids[0] must be an object` },
  { name: 'uids null members removed', event: ud({ uids: [{ id: H1, source: null, atype: null, ext: null }] }), expect: { event: ud({ uids: [{ id: H1 }] }) } },

  // ---- address
  { name: 'address first_name not hashed', event: addr({ first_name: 'jane' }), expect: NOT_HASHED('user_data.address[0].first_name') },
  { name: 'address last_name uppercase', event: addr({ last_name: H3.toUpperCase() }), expect: NOT_HASHED('user_data.address[0].last_name') },
  { name: 'address street not hashed', event: addr({ street: '1 main st' }), expect: NOT_HASHED('user_data.address[0].street') },
  { name: 'address postal_code not hashed', event: addr({ postal_code: '10001' }), expect: NOT_HASHED('user_data.address[0].postal_code') },
  { name: 'second address postal_code', event: ud({ address: [{ postal_code: H1 }, { postal_code: 'SW1A 1AA' }] }), expect: NOT_HASHED('user_data.address[1].postal_code') },
  { name: 'address country_code lowercase accepted', event: addr({ country_code: 'de' }), expect: 'unchanged' },
  { name: 'address country_code uppercase accepted unchanged', event: addr({ country_code: 'DE' }), expect: 'unchanged' },
  { name: 'address country_code mixed case accepted unchanged', event: addr({ country_code: 'De' }), expect: 'unchanged' },
  { name: 'address country_code uk', event: addr({ country_code: 'uk' }), expect: 'invalid field user_data.address[0].country_code: the ISO 3166-1 alpha-2 code of the United Kingdom is "gb"' },
  { name: 'address country_code unassigned', event: addr({ country_code: 'zz' }), expect: 'invalid field user_data.address[0].country_code: must be an ISO 3166-1 alpha-2 country code, e.g. "us"' },
  { name: 'address country_code alpha-3', event: addr({ country_code: 'usa' }), expect: 'invalid field user_data.address[0].country_code: must be an ISO 3166-1 alpha-2 country code, e.g. "us"' },
  { name: 'address_type shipping accepted', event: addr({ address_type: 'shipping' }), expect: 'unchanged' },
  { name: 'address_type unknown accepted', event: addr({ address_type: 'unknown' }), expect: 'unchanged' },
  { name: 'address_type home', event: addr({ address_type: 'home' }), expect: `${S}user_data.address[0].address_type must be one of "billing", "shipping", "unknown", got "home"` },
  { name: 'address unknown field', event: addr({ zip: '10001' }), expect: `${S}unknown field user_data.address[0].zip` },
  { name: 'address null entry', event: ud({ address: [null] }), expect: `${S}user_data.address[0] must be an object` },
  { name: 'address as an object', event: ud({ address: { city: 'x' } }), expect: `${S}user_data.address must be an array of address objects` },
  { name: 'address city as a number', event: addr({ city: 1 }), expect: `${S}user_data.address[0].city must be a string` },

  // ---- GPP validity (policy 'enforce' with no opt-out in these strings)
  { name: 'gpp_string that cannot be decoded', event: ud({ gpp_string: 'DBABLA~zz' }), expect: 'invalid field user_data.gpp_string: cannot be decoded as a GPP string (check the header and every section)' },
  { name: 'gpp_string with a truncated section', event: ud({ gpp_string: US_GPP.slice(0, US_GPP.indexOf('~') + 3) }), expect: 'invalid field user_data.gpp_string: cannot be decoded as a GPP string (check the header and every section)' },
  { name: 'gpp_string with fewer sections than its header', event: ud({ gpp_string: US_GPP.slice(0, US_GPP.indexOf('~')) + '~' }), expect: 'invalid field user_data.gpp_string: cannot be decoded as a GPP string (check the header and every section)' },
  { name: 'gpp_string empty', event: ud({ gpp_string: '' }), expect: 'invalid field user_data.gpp_string: is empty; omit gpp_string when there is no consent string' },
  { name: 'gpp_string that is a bare TCF string', event: ud({ gpp_string: gpp({ tcfeuv2: { PurposeConsents: new Array(24).fill(true) } }).split('~')[1] }), expect: 'invalid field user_data.gpp_string: is a bare TCF string, not a GPP string; send it as the tcfeuv2 section of a GPP string' },
  { name: 'gpp_string as a number', event: ud({ gpp_string: 7 }), expect: `${S}user_data.gpp_string must be a string` },
  { name: 'gpp_sid naming a section the string lacks', event: ud({ gpp_string: US_GPP, gpp_sid: [7, 8] }), expect: 'invalid field user_data.gpp_sid[1]: section 8 is not in user_data.gpp_string (it has sections 7)' },
  { name: 'gpp_sid before gpp_string is checked against it', event: ud({ gpp_sid: [2], gpp_string: US_GPP }), expect: 'invalid field user_data.gpp_sid[0]: section 2 is not in user_data.gpp_string (it has sections 7)' },
  { name: 'gpp_sid without gpp_string', event: ud({ gpp_sid: [7] }), expect: 'invalid field user_data.gpp_sid: requires user_data.gpp_string' },
  { name: 'gpp_sid with header (3) and signal integrity (4) sections accepted', event: ud({ gpp_string: US_GPP, gpp_sid: [3, 4, 7] }), expect: 'unchanged' },
  { name: 'gpp_sid with a string entry', event: ud({ gpp_string: US_GPP, gpp_sid: ['7'] }), expect: `${S}user_data.gpp_sid[0] must be an integer` },
  { name: 'gpp_sid that is a number', event: ud({ gpp_string: US_GPP, gpp_sid: 7 }), expect: `${S}user_data.gpp_sid must be an array of integers` },
  { name: 'undecodable gpp_string reported even after a gpp_sid', event: ud({ gpp_sid: [7], gpp_string: 'DBABLA~zz' }), expect: 'invalid field user_data.gpp_string: cannot be decoded as a GPP string (check the header and every section)' },

  // ---- properties
  { name: 'properties that is a string', event: minimal({ properties: 'x' }), expect: `${S}properties must be an object` },
  { name: 'unknown properties members accepted unchanged (nulls inside kept)', event: props({ my_field: 1, other: null, nested: { a: [1] } }), expect: 'unchanged' },
  { name: 'page_url relative', event: props({ page_url: '/cart' }), expect: 'invalid field properties.page_url: must be an absolute http(s) URL, e.g. "https://shop.example/cart"' },
  { name: 'page_url ftp', event: props({ page_url: 'ftp://example.com/file' }), expect: 'invalid field properties.page_url: must be an absolute http(s) URL, e.g. "https://shop.example/cart"' },
  { name: 'page_url without host', event: props({ page_url: 'https:///cart' }), expect: 'invalid field properties.page_url: must be an absolute http(s) URL, e.g. "https://shop.example/cart"' },
  { name: 'page_url with an uppercase scheme accepted', event: props({ page_url: 'HTTP://Example.com/a' }), expect: 'unchanged' },
  { name: 'referrer need not be a URL', event: props({ referrer: 'google' }), expect: 'unchanged' },
  { name: 'arrival_date YYYYMMDD accepted', event: props({ arrival_date: '20240229' }), expect: 'unchanged' },
  { name: 'departure_date YYYY-MM-DD accepted', event: props({ departure_date: '2024-12-31' }), expect: 'unchanged' },
  { name: 'arrival_date 30 February', event: props({ arrival_date: '20250230' }), expect: 'invalid field properties.arrival_date: is not a real calendar date' },
  { name: 'departure_date 29 February of a common year', event: props({ departure_date: '2025-02-29' }), expect: 'invalid field properties.departure_date: is not a real calendar date' },
  { name: 'lease_start_date month 13', event: props({ lease_start_date: '20251301' }), expect: 'invalid field properties.lease_start_date: is not a real calendar date' },
  { name: 'lease_end_date with slashes', event: props({ lease_end_date: '2025/01/31' }), expect: 'invalid field properties.lease_end_date: must be a date as YYYYMMDD or YYYY-MM-DD' },
  { name: 'lease_end_date 1900-02-29 (not a leap year)', event: props({ lease_end_date: '1900-02-29' }), expect: 'invalid field properties.lease_end_date: is not a real calendar date' },
  { name: 'arrival_date with a one-digit month', event: props({ arrival_date: '2025-1-015' }), expect: 'invalid field properties.arrival_date: must be a date as YYYYMMDD or YYYY-MM-DD' },
  { name: 'arrival_date as a number', event: props({ arrival_date: 20250101 }), expect: `${S}properties.arrival_date must be a string` },
  ...Object.entries(PROPERTY_ENUMS).flatMap(([field, values]) => values.map((v): Case => ({ name: `properties.${field} "${v}" accepted`, event: props({ [field]: v }), expect: 'unchanged' }))),
  ...Object.entries(PROPERTY_ENUMS).map(([field, values]): Case => ({
    name: `properties.${field} unknown value`, event: props({ [field]: 'bogus' }),
    expect: `${S}properties.${field} must be one of ${values.map((v) => JSON.stringify(v)).join(', ')}, got "bogus"`,
  })),
  { name: 'fuel_type with a space instead of an underscore', event: props({ fuel_type: 'plugin hybrid' }), expect: `${S}properties.fuel_type must be one of ${PROPERTY_ENUMS['fuel_type']!.map((v) => JSON.stringify(v)).join(', ')}, got "plugin hybrid"` },
  { name: 'coupon as a bare string', event: props({ coupon: 'SPRING' }), expect: `${S}properties.coupon must be an array of strings` },
  { name: 'payment_type with a number', event: props({ payment_type: ['card', 2] }), expect: `${S}properties.payment_type[1] must be a string` },
  { name: 'shipping Infinity', event: props({ shipping: Infinity }), expect: `${S}properties.shipping must be a finite number` },
  { name: 'tax as a string', event: props({ tax: '1.00' }), expect: `${S}properties.tax must be a finite number` },
  { name: 'character_level fractional', event: props({ character_level: 1.5 }), expect: `${S}properties.character_level must be an integer` },
  { name: 'post_score as a string', event: props({ post_score: '10' }), expect: `${S}properties.post_score must be an integer` },
  { name: 'properties.ext that is a string', event: props({ ext: 'x' }), expect: `${S}properties.ext must be an object` },

  // ---- items
  { name: 'items as an object', event: props({ items: { id: 'a' } }), expect: `${S}properties.items must be an array of item objects` },
  { name: 'items[2].price as a string', event: props({ items: [{ id: 'a' }, { id: 'b' }, { id: 'c', price: '9.99' }] }), expect: `${S}properties.items[2].price must be a finite number` },
  { name: 'item quantity fractional accepted', event: props({ items: [{ id: 'a', quantity: 0.25 }] }), expect: 'unchanged' },
  { name: 'item quantity as a string', event: props({ items: [{ id: 'a', quantity: '1' }] }), expect: `${S}properties.items[0].quantity must be a finite number` },
  { name: 'item discount Infinity', event: props({ items: [{ id: 'a', discount: -Infinity }] }), expect: `${S}properties.items[0].discount must be a finite number` },
  { name: 'item unknown field', event: props({ items: [{ id: 'a', sku: 'x' }] }), expect: `${S}unknown field properties.items[0].sku` },
  { name: 'item cattax as a string', event: props({ items: [{ id: 'a', cattax: 'IAB' }] }), expect: `${S}properties.items[0].cattax must be an integer` },
  { name: 'item id as a number', event: props({ items: [{ id: 7 }] }), expect: `${S}properties.items[0].id must be a string` },
  { name: 'item ext with any content accepted', event: props({ items: [{ id: 'a', ext: { x: [null] } }] }), expect: 'unchanged' },

  // ---- the null rule
  { name: 'null user_data and properties removed', event: minimal({ user_data: null, properties: null }), expect: { event: minimal() } },
  { name: 'null members inside user_data removed', event: ud({ customer_identifier: null, email_address: null, age_range: null, gpp_string: null, ext: null }), expect: { event: ud({}) } },
  { name: 'null members inside an address removed', event: addr({ first_name: null, city: 'paris', country_code: null }), expect: { event: addr({ city: 'paris' }) } },
  { name: 'null known properties members removed, unknown kept', event: props({ page_url: null, items: [{ id: 'a', price: null }], mine: null }), expect: { event: props({ items: [{ id: 'a' }], mine: null }) } },
  { name: 'null id and source removed', event: minimal({ id: null, source: null, currency_code: null, custom_event: null }), expect: { event: minimal() } },

  // ---- order of errors: the first problem in document order
  { name: 'required-field absence is reported before any other problem', event: { data_set_id: 'ds_1', user_data: { customer_identifier: 'x' }, event_type: 'nope' }, expect: 'missing required field: timestamp' },
  { name: 'user_data before properties: user_data problem reported', event: minimal({ user_data: { gender: 'f' }, properties: { page_url: 'x' } }), expect: NOT_HASHED('user_data.gender') },
  { name: 'properties before user_data: properties problem reported', event: minimal({ properties: { page_url: 'x' }, user_data: { gender: 'f' } }), expect: 'invalid field properties.page_url: must be an absolute http(s) URL, e.g. "https://shop.example/cart"' },
  { name: 'value before a bad hash: missing currency_code reported', event: minimal({ value: 1, user_data: { gender: 'f' } }), expect: 'missing required field: currency_code' },
  { name: 'bad hash before value: hash reported', event: { data_set_id: 'ds_1', timestamp: TS, event_type: 'purchase', user_data: { gender: 'f' }, value: 1 }, expect: NOT_HASHED('user_data.gender') },
  { name: 'unknown member before a type error', event: minimal({ zzz: 1, source: 5 }), expect: `${S}unknown field zzz` },
  { name: 'type error before an unknown member', event: minimal({ source: 5, zzz: 1 }), expect: `${S}source must be a string` },
  { name: 'bad timestamp reported before a later bad event_type', event: { data_set_id: 'ds_1', timestamp: TS * 1000, event_type: 'x' }, expect: 'invalid field timestamp: looks like milliseconds; send unix seconds' },
  { name: 'bad event_type reported before a later bad timestamp', event: { data_set_id: 'ds_1', event_type: 'x', timestamp: TS * 1000 }, expect: `${S}event_type must be one of the ECAPI 1.0 event types, got "x"` },
  { name: 'within an array the first bad element wins', event: ud({ email_address: [H1, 'a', 'B'] }), expect: NOT_HASHED('user_data.email_address[1]') },
  { name: 'within an address: document order of its members', event: addr({ postal_code: 'x', first_name: 'y' }), expect: NOT_HASHED('user_data.address[0].postal_code') },
  { name: 'null on a later member does not hide an earlier problem', event: ud({ gender: 'f', age_range: null }), expect: NOT_HASHED('user_data.gender') },
];

// The enumerations of the published schema are the ones the tests use (exact ECAPI strings).
test('schema enumerations match ECAPI 1.0 exactly', () => {
  const eq = (a: unknown, b: unknown): void => { if (JSON.stringify(a) !== JSON.stringify(b)) throw new Error(`${JSON.stringify(a)} !== ${JSON.stringify(b)}`); };
  eq(defs['EventType']!.enum, [...STANDARD_EVENTS, 'custom', ...ADDITIONAL_EVENTS]);
  eq(defs['Source']!.enum, SOURCES);
  eq(defs['AddressType']!.enum, ['billing', 'shipping', 'unknown']);
  eq(defs['AgeRange']!.enum, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
  for (const [field, values] of Object.entries(PROPERTY_ENUMS)) eq(defs['Properties']!.properties![field]!.enum, values);
});

for (const c of cases) test(c.name, () => runCase(c));
