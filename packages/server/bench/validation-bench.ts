/**
 * Micro-benchmark of event validation + privacy policy on one core: a realistic full ECAPI event
 * (user_data with SHA-256 identifiers, two addresses, uids, a real GPP string, IPs and user agent;
 * properties with page URL, referrer and three items). Each measured check() gets a freshly
 * parsed copy of the event (the processor may mutate its input), parsed outside the timed loop.
 * Prints one line of JSON: {"events_per_second": N, ...}. Runs for about 3 seconds.
 *
 *   node packages/server/dist/bench/validation-bench.js
 */
import { createHash } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { GppModel } from '@iabgpp/cmpapi';
import { DEFAULT_POLICY } from '../src/control/data-set-policy.js';
import { createEventProcessor } from '../src/validation/event-processor.js';

const sha = (s: string): string => createHash('sha256').update(s).digest('hex');

export function usnatString(): string {
  const model = new GppModel();
  model.setFieldValue('usnat', 'SharingNotice', 1);
  model.setFieldValue('usnat', 'SaleOptOutNotice', 1);
  model.setFieldValue('usnat', 'SaleOptOut', 2);
  model.setFieldValue('usnat', 'SharingOptOut', 2);
  model.setFieldValue('usnat', 'TargetedAdvertisingOptOut', 2);
  return model.encode();
}

export function realisticEvent(nowSeconds: number, gppString: string): Record<string, unknown> {
  return {
    data_set_id: 'ds_4f1c2a',
    id: 'order-2025-000184223',
    timestamp: nowSeconds - 42,
    event_type: 'purchase',
    source: 'website',
    value: 142.97,
    currency_code: 'USD',
    user_data: {
      customer_identifier: sha('cust-000184223'),
      email_address: [sha('user@example.com'), sha('user.alt@example.org')],
      phone_numbers: [sha('+12125550000')],
      address: [
        { first_name: sha('jane'), last_name: sha('doe'), street: sha('1 main st'), city: 'new york', state: 'ny', country_code: 'us', postal_code: sha('10001'), address_type: 'billing' },
        { first_name: sha('jane'), last_name: sha('doe'), street: sha('9 side ave'), city: 'brooklyn', state: 'ny', country_code: 'us', postal_code: sha('11201'), address_type: 'shipping' },
      ],
      uids: [
        { id: sha('uid2-abc'), source: 'uidapi.com', atype: 3 },
        { id: sha('id5-xyz'), source: 'id5-sync.com', atype: 1 },
      ],
      customer_segments: ['gold member', 'frequent shopper'],
      utcoffset: -300,
      gpp_string: gppString,
      gpp_sid: [7],
      click_id: 'cl_9f8e7d6c5b4a',
      event_ip_address: '203.0.113.77',
      event_user_agent: 'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15',
      age_range: 4,
      gender: sha('f'),
    },
    properties: {
      transaction_id: 'T-000184223',
      page_url: 'https://shop.example.com/checkout/complete?order=000184223&utm_source=newsletter',
      referrer: 'https://shop.example.com/cart',
      ad_source: 'newsletter',
      coupon: ['SPRING10'],
      shipping: 4.99,
      tax: 11.98,
      payment_type: ['credit_card'],
      items: [
        { id: 'SKU-1001', name: 'Trail running shoe', price: 89.0, quantity: 1, brand: 'Acme', category: 'footwear' },
        { id: 'SKU-2040', name: 'Merino socks', price: 12.5, quantity: 2, discount: 1.0, brand: 'Acme', category: 'apparel' },
        { id: 'SKU-3300', name: 'Gift wrap', price: 3.99, quantity: 1 },
      ],
    },
  };
}

function main(): void {
  const nowSeconds = Math.floor(Date.now() / 1000);
  const processor = createEventProcessor();
  const json = JSON.stringify(realisticEvent(nowSeconds, usnatString()));
  const context = { nowSeconds, policy: DEFAULT_POLICY };

  // sanity: the benchmark event must be accepted
  const probe = processor.check(JSON.parse(json), context);
  if (!probe.ok) throw new Error(`benchmark event rejected: ${probe.error}`);

  const POOL = 1_000; // one maximum-size batch, parsed before it is validated, as the request path does
  const DURATION_NS = 3_000_000_000n;
  let events = 0;
  let measuredNs = 0n;
  let rounds = 0;
  while (measuredNs < DURATION_NS) {
    const pool: unknown[] = new Array(POOL);
    for (let i = 0; i < POOL; i++) pool[i] = JSON.parse(json);
    const start = process.hrtime.bigint();
    for (let i = 0; i < POOL; i++) {
      const result = processor.check(pool[i], context);
      if (!result.ok) throw new Error(result.error);
    }
    const elapsed = process.hrtime.bigint() - start;
    if (rounds > 0) { // first round is warm-up
      measuredNs += elapsed;
      events += POOL;
    }
    rounds++;
  }
  const seconds = Number(measuredNs) / 1e9;
  console.log(JSON.stringify({
    events_per_second: Math.round(events / seconds),
    ns_per_event: Math.round(Number(measuredNs) / events),
    events,
    seconds: Number(seconds.toFixed(3)),
    event_bytes: Buffer.byteLength(json),
    policy: { consent: DEFAULT_POLICY.consent, ip: DEFAULT_POLICY.ip, piiScan: DEFAULT_POLICY.piiScan },
    node: process.version,
  }));
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) main();
