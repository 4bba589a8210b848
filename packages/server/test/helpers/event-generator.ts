/**
 * Deterministic synthetic ECAPI events for consumer tests and the consumer benchmark: re-sends of
 * the same id, events without id, shared identifiers that link identities, measurement-only events.
 */
import { createHash } from 'node:crypto';
import type { EventPolicyMeta } from '../../src/events/event-outcome.js';

export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const hashCache = new Map<string, string>();
export function sha(text: string): string {
  let h = hashCache.get(text);
  if (!h) {
    h = createHash('sha256').update(text).digest('hex');
    if (hashCache.size < 200_000) hashCache.set(text, h);
  }
  return h;
}

export const EVENT_TYPES = ['purchase', 'page_view', 'add_to_cart', 'generate_lead', 'sign_up'] as const;
export const SOURCES = ['website', 'app', 'email', 'physical_store'] as const;

export interface GeneratedRecord {
  readonly dataSetId: string;
  readonly event: Record<string, unknown>;
  readonly meta: EventPolicyMeta | undefined;
}

export interface GeneratorOptions {
  readonly seed?: number;
  readonly dataSets?: readonly string[];
  /** Distinct ids relative to the number of events (smaller: more re-sends). */
  readonly idSpace?: number;
  /** Distinct identifiers per kind relative to the number of events (smaller: more linking). */
  readonly identifierSpace?: number;
}

export function generateEvents(count: number, options: GeneratorOptions = {}): GeneratedRecord[] {
  const rand = prng(options.seed ?? 42);
  const dataSets = options.dataSets ?? ['ds-a', 'ds-b'];
  const ids = Math.max(1, Math.floor(count * (options.idSpace ?? 0.8)));
  const idents = Math.max(1, Math.floor(count * (options.identifierSpace ?? 0.5)));
  const pick = <T>(list: readonly T[]) => list[Math.floor(rand() * list.length)]!;
  const out: GeneratedRecord[] = [];
  for (let i = 0; i < count; i++) {
    const dataSetId = pick(dataSets);
    const event: Record<string, unknown> = {
      data_set_id: dataSetId,
      timestamp: 1_746_558_464 + i,
      event_type: pick(EVENT_TYPES),
    };
    if (rand() < 0.9) event.id = `evt-${Math.floor(rand() * ids)}`;
    if (rand() < 0.8) event.source = pick(SOURCES);
    if (rand() < 0.5) {
      event.value = Math.round(rand() * 100_000) / 100;
      event.currency_code = rand() < 0.8 ? 'USD' : 'EUR';
    }
    const ud: Record<string, unknown> = {};
    if (rand() < 0.6) ud.email_address = [sha(`email-${Math.floor(rand() * idents)}`)];
    if (rand() < 0.4) ud.phone_numbers = [sha(`phone-${Math.floor(rand() * idents)}`)];
    if (rand() < 0.3) ud.customer_identifier = sha(`cid-${Math.floor(rand() * idents)}`);
    if (rand() < 0.1) ud.uids = [{ id: sha(`uid-${Math.floor(rand() * idents)}`), source: 'id.example.com', atype: 1 }];
    if (rand() < 0.1) ud.ifa = `ifa-${Math.floor(rand() * idents)}`;
    if (rand() < 0.2) ud.address = [{ city: rand() < 0.5 ? ' Paris ' : 'lyon', country_code: rand() < 0.5 ? 'FR' : 'fr', postal_code: sha(`zip-${Math.floor(rand() * 100)}`) }];
    if (rand() < 0.5) {
      ud.event_ip_address = `10.0.${Math.floor(rand() * 255)}.${Math.floor(rand() * 255)}`;
      if (rand() < 0.9) ud.event_user_agent = 'Mozilla/5.0';
    }
    if (rand() < 0.3) ud.click_id = `clk-${Math.floor(rand() * 1e9)}`;
    if (rand() < 0.05) ud.mmt_only = true;
    if (Object.keys(ud).length > 0) event.user_data = ud;
    if (rand() < 0.3) event.properties = { page_url: `https://shop.example.com/p/${i}`, items: [{ id: `sku-${Math.floor(rand() * 50)}`, quantity: 1 }] };
    const meta: EventPolicyMeta | undefined =
      rand() < 0.05 ? { consent: { decision: 'measurement_only', sections: [7], signals: ['SaleOptOut'] } } : undefined;
    out.push({ dataSetId, event, meta });
  }
  return out;
}
