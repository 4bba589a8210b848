/**
 * The queued events of the consumer's model tests (test/consumer/batch-applier-model.test.ts on the
 * embedded store, postgres-sharded-layout.test.ts on PostgreSQL): fast-check arbitraries of events
 * whose identifiers unite identities (shared e-mail and phone digests, customer ids in two
 * spellings, uids, device ids), with re-sends of a few ids, arrivals that go backwards a little (several serving
 * processes), measurement-only consent; and a store whose batches roll back before their commit.
 */
import fc from 'fast-check';
import type { ViewStore, ViewTransaction } from '../../src/merged-view/view-store.js';

const hex = (n: number) => n.toString(16).padStart(64, '0');
const someOf = <T>(arb: fc.Arbitrary<T>) => fc.array(arb, { minLength: 0, maxLength: 2 });

const userData = fc.record(
  {
    email_address: someOf(fc.integer({ min: 0, max: 5 }).map((n) => (n % 2 ? hex(n).toUpperCase() : hex(n)))),
    phone_numbers: someOf(fc.integer({ min: 10, max: 14 }).map(hex)),
    customer_identifier: fc.option(fc.constantFrom('Cust-1', 'cust-1', 'cust-2', 'cust-3'), { nil: null }),
    uids: someOf(fc.record({ id: fc.integer({ min: 20, max: 23 }).map(hex), source: fc.constantFrom('ID.example.com', ' id.example.com ') })),
    ifa: fc.constantFrom('ifa-1', ' IFA-1 ', 'ifa-2', ''),
    address: someOf(fc.record({ city: fc.constantFrom(' New  York ', 'new york', 'Paris'), country_code: fc.constantFrom('US', 'fr') })),
    event_ip_address: fc.constant('203.0.113.9'),
    event_user_agent: fc.constant('Mozilla/5.0'),
    click_id: fc.constantFrom('clk-1', 'clk-2'),
    mmt_only: fc.boolean(),
  },
  { requiredKeys: [] },
);

/** The fields of a queued event but its data set (each test draws that its own way). */
export const queuedEventFields = {
  id: fc.option(fc.integer({ min: 0, max: 7 }).map((n) => `e${n}`), { nil: undefined, freq: 6 }),
  /** Minutes after the previous arrival (sometimes a little before it: several serving processes). */
  advance: fc.oneof(fc.integer({ min: -2, max: 20 }), fc.integer({ min: 50, max: 200 })),
  eventType: fc.constantFrom('purchase', 'page_view'),
  source: fc.option(fc.constantFrom('website', 'app'), { nil: undefined }),
  value: fc.option(fc.integer({ min: -500, max: 100_000 }).map((c) => c / 100), { nil: undefined }),
  currency: fc.constantFrom('USD', 'eur'),
  userData: fc.option(userData, { nil: undefined, freq: 8 }),
  consentMmt: fc.boolean(),
  segments: fc.option(fc.array(fc.constantFrom('gold', 'silver'), { maxLength: 2 }), { nil: undefined }),
};

export type QueuedEventFields = { [K in keyof typeof queuedEventFields]: (typeof queuedEventFields)[K] extends fc.Arbitrary<infer T> ? T : never };

/** The `i`-th item's event in data set `dataSetId`, and its consent meta (every third measurement-only item). */
export function modelEvent(it: QueuedEventFields, i: number, dataSetId: string) {
  const event: Record<string, unknown> = { data_set_id: dataSetId, timestamp: 1_746_558_464 + i, event_type: it.eventType };
  if (it.id !== undefined) event.id = it.id;
  if (it.source !== undefined) event.source = it.source;
  if (it.value !== undefined) {
    event.value = it.value;
    event.currency_code = it.currency;
  }
  if (it.userData !== undefined) event.user_data = it.segments ? { ...it.userData, customer_segments: it.segments } : it.userData;
  const meta = it.consentMmt && i % 3 === 0 ? { consent: { decision: 'measurement_only' as const, sections: [7], signals: ['SaleOptOut'] } } : undefined;
  return { event, meta };
}

/** The error of an injected rollback. */
export const INJECTED = 'injected failure before commit';

/**
 * `store` whose transactions fail (roll back, after their work and before the commit) when
 * `failNext()` says so: a batch interrupted before its commit. `wrap`: what else to wrap (a
 * PostgreSQL store's lane stores, `forPart`).
 */
export function failingStore<S extends ViewStore>(store: S, failNext: () => boolean, wrap: (prop: string | symbol, target: S) => unknown = () => undefined): S {
  return new Proxy(store, {
    get(target, prop) {
      if (prop === 'transaction') {
        return <T>(work: (tx: ViewTransaction) => Promise<T>) =>
          target.transaction(async (tx) => {
            const result = await work(tx);
            if (failNext()) throw new Error(INJECTED);
            return result;
          });
      }
      const wrapped = wrap(prop, target);
      if (wrapped !== undefined) return wrapped;
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}
