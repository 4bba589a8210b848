/**
 * The consumer benchmark's workload: realistic ECAPI events of about 1 KB with five identifiers
 * each (an email hash, a phone hash, a customer id, a `uids[]` id and an `ifa`), in two data sets
 * (or as many as asked: one data set carrying every event is the case one large sender makes),
 * 30% of them re-sends of an earlier id (a changed value and click id: the merge has work to do).
 * Identifiers repeat across events (a user buys several times, a household shares a phone), so
 * identities link and absorb one another. Deterministic: the same arguments give the same events.
 */
import { createHash } from 'node:crypto';
import { prng } from '../test/helpers/event-generator.js';
import type { EventQueue } from '../src/queue/event-queue.js';
import { DEFAULT_POLICY } from '../src/control/data-set-policy.js';

const sha = (text: string) => createHash('sha256').update(text).digest('hex');

export interface ConsumerWorkloadOptions {
  readonly seed?: number;
  /** Share of events that re-send an earlier id (default 0.3). */
  readonly resendShare?: number;
  readonly dataSets?: readonly string[];
}

export interface WorkloadEvent {
  readonly dataSetId: string;
  readonly event: Record<string, unknown>;
}

/** Events `from` … `from + count - 1` of the workload (generated in slices to bound memory). */
export function* consumerWorkload(total: number, options: ConsumerWorkloadOptions = {}): Generator<WorkloadEvent[]> {
  const rand = prng(options.seed ?? 7);
  const dataSets = options.dataSets ?? ['ds-a', 'ds-b'];
  const resend = options.resendShare ?? 0.3;
  const users = Math.max(1, Math.floor(total / 4)); // about four events per user
  let created = 0;
  const slice = 1000;
  for (let start = 0; start < total; start += slice) {
    const out: WorkloadEvent[] = [];
    for (let i = start; i < Math.min(total, start + slice); i++) {
      const isResend = created > 0 && rand() < resend;
      // A re-send repeats an id created in the last ~100,000 events (within the merge window).
      const n = isResend ? created - 1 - Math.floor(rand() * Math.min(created, 100_000)) : created++;
      const dataSetId = dataSets[n % dataSets.length]!;
      const user = Math.floor((n * 2654435761) % users);
      const household = Math.floor(user / 3);
      out.push({
        dataSetId,
        event: {
          data_set_id: dataSetId,
          id: `order-${n}`,
          timestamp: 1_746_558_464 + i,
          event_type: n % 5 === 0 ? 'add_to_cart' : 'purchase',
          value: isResend ? 20 + (i % 500) : 10 + (n % 990) / 10,
          currency_code: n % 7 === 0 ? 'EUR' : 'USD',
          source: n % 11 === 0 ? 'app' : 'website',
          user_data: {
            email_address: [sha(`user${user}@example.com`)],
            phone_numbers: [sha(`+1212555${household}`)],
            customer_identifier: sha(`customer-${user}`),
            uids: [{ id: sha(`uid-${user}`), source: 'ID.example.com', atype: 3 }],
            ifa: `6d92078a-8246-4ba4-ae5b-${String(user).padStart(12, '0')}`,
            address: [{ postal_code: sha(String(10_000 + (user % 5000))), city: ' New  York ', country_code: 'US' }],
            event_ip_address: `203.0.113.${user % 250}`,
            event_user_agent: 'Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0',
            click_id: `clk-${i}`,
          },
          properties: {
            transaction_id: `tx-${n}`,
            page_url: 'https://shop.example/checkout/complete',
            items: [{ id: `sku-${n % 300}`, name: 'Trail running shoe', price: 89.5, quantity: 1 }],
          },
        },
      });
    }
    yield out;
  }
}

/**
 * Appends the workload to a queue as batched ingest stores it: one request per data set and slice,
 * its raw body kept (so large ones sit in the body log), with at most `inFlight` appends pending.
 * `perRequest` (default: the whole slice of a data set) cuts requests smaller: 1 queues single-event
 * requests as single-event ingest does (a bare event as the body, one segment per event).
 */
export async function appendConsumerWorkload(
  queue: EventQueue,
  total: number,
  inFlight: number,
  dataSets: readonly string[] = ['ds-a', 'ds-b'],
  perRequest = Number.MAX_SAFE_INTEGER,
): Promise<void> {
  const t0 = Date.now();
  let request = 0;
  let pending: Promise<unknown>[] = [];
  for (const slice of consumerWorkload(total, { dataSets })) {
    for (const ds of dataSets) {
      const all = slice.filter((g) => g.dataSetId === ds).map((g) => g.event);
      for (let at = 0; at < all.length; at += perRequest) {
        const events = all.slice(at, at + perRequest);
        request++;
        pending.push(queue.append({
          requestId: `r${request}`, keyId: 'key_bench', dataSetId: ds, receivedAt: t0 + request, policyVersion: 1, mergeWindowMs: DEFAULT_POLICY.mergeWindowMs,
          events, metas: events.map(() => undefined), rawBody: Buffer.from(JSON.stringify(perRequest === 1 ? events[0] : { events })),
        }));
      }
    }
    if (pending.length >= inFlight) {
      await Promise.all(pending);
      pending = [];
    }
  }
  await Promise.all(pending);
}
