/** Realistic, valid, distinct ECAPI events and signed request bodies for the benchmarks. */
import { createHash } from 'node:crypto';
import { signBody } from '@ecapi-ingest/protocol';

const sha = (text: string) => createHash('sha256').update(text).digest('hex');

let counter = 0;

export function benchEvent(dataSetId: string): Record<string, unknown> {
  const n = counter++;
  const now = Math.floor(Date.now() / 1000);
  return {
    data_set_id: dataSetId,
    id: `bench-${process.pid}-${n}`,
    timestamp: now - (n % 600),
    event_type: n % 5 === 0 ? 'add_to_cart' : 'purchase',
    value: 10 + (n % 990) / 10,
    currency_code: 'USD',
    source: 'website',
    user_data: {
      email_address: [sha(`user${n % 50_000}@example.com`)],
      phone_numbers: [sha(`+1212555${String(n % 10_000).padStart(4, '0')}`)],
      customer_identifier: sha(`customer-${n % 40_000}`),
      address: [{ postal_code: sha(String(10_000 + (n % 5000))), city: 'new york', country_code: 'us' }],
      event_ip_address: `203.0.113.${n % 250}`,
      event_user_agent: 'Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0',
      click_id: `clk-${n}`,
    },
    properties: {
      transaction_id: `tx-${n}`,
      page_url: 'https://shop.example/checkout/complete',
      items: [{ id: `sku-${n % 300}`, name: 'Trail running shoe', price: 89.5, quantity: 1 }],
    },
  };
}

export interface SignedBody {
  readonly body: string;
  readonly signature: string;
  readonly events: number;
}

/** About 900 bytes per event, so that 1,000 of them fit the 1 MiB request limit. */
/** `count` distinct bodies of `eventsPerRequest` events each (a bare event when 1). */
export function signedBodies(dataSetId: string, secret: string, eventsPerRequest: number, count: number): SignedBody[] {
  const bodies: SignedBody[] = [];
  for (let i = 0; i < count; i++) {
    const body = eventsPerRequest === 1
      ? JSON.stringify(benchEvent(dataSetId))
      : JSON.stringify({ events: Array.from({ length: eventsPerRequest }, () => benchEvent(dataSetId)) });
    bodies.push({ body, signature: signBody(body, secret), events: eventsPerRequest });
  }
  return bodies;
}
