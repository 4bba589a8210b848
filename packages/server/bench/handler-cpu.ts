/**
 * The request handler without HTTP (issue 17): CPU per call of `handleEventsRequest` (authentication
 * with HMAC, media types, grants, payload checks, then optionally the limiter and validation; the
 * queue acknowledges at once) against the HMAC+parse reference's own work (reference-handler.ts:
 * HMAC-SHA256 with a Buffer key, constant-time compare, JSON.parse), on the same signed single-event
 * bodies as `npm run bench`. One process, the variants alternated over 3 rounds, so a busy machine
 * weighs on all alike: the ladder's HTTP rungs cannot separate these pieces as finely.
 *
 *   node packages/server/dist/bench/handler-cpu.js [calls=40000]
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { cliJson, provision, tempDataDir } from '../test/helpers/server-process.js';
import { signedBodies } from './bench-events.js';
import { UNLIMITED } from './bench-service.js';
import { openStorage } from '../src/storage/open-storage.js';
import { CredentialCache } from '../src/control/credential-cache.js';
import { handleEventsRequest, type EventsRequestDeps } from '../src/http/events-request.js';
import { createEventProcessor } from '../src/validation/event-processor.js';
import { LocalRateLimiter } from '../src/rate-limit/local-rate-limiter.js';
import { UnlimitedRateLimiter } from '../src/rate-limit/unlimited-rate-limiter.js';
import type { EventProcessor } from '../src/validation/event-check.js';
import type { EventQueue } from '../src/queue/event-queue.js';
import type { ServiceMetrics } from '../src/observability/service-metrics.js';

const CALLS = Number(process.argv[2] ?? 40_000);
const DS = 'bench';

async function main(): Promise<void> {
  const dataDir = tempDataDir('ecapi-handler-cpu-');
  const creds = await provision(dataDir, [DS]);
  await cliJson(dataDir, ['data-set', 'limits', DS, ...UNLIMITED]);
  const storage = await openStorage({ dataDir, env: 'production' });
  const cache = await CredentialCache.start(storage.controlPlane(), { intervalMs: 3_600_000 });
  const requests = signedBodies(DS, creds.secret, 1, 2000).map((b) => ({
    body: Buffer.from(b.body),
    headers: { 'content-type': 'application/json', accept: 'application/json', 'x-service-key-id': creds.keyId, 'x-service-data-set': DS, 'x-service-signature': b.signature },
  }));
  const noop = { inc() {}, observe() {} };
  const metrics = { countRequest() {}, requestDuration: noop, queueAppendDuration: noop, eventsAccepted: noop, eventsRejected: noop, rateLimited: noop, piiRedactions: noop } as unknown as ServiceMetrics;
  const queue = { append: (batch) => Promise.resolve({ firstSeq: 0, count: batch.events.length }) } as EventQueue;
  const accepted = (event: unknown) => ({ ok: true as const, event: event as Record<string, unknown>, meta: undefined, modified: false });
  const acceptAll: EventProcessor = { evaluate: accepted, check: accepted };
  const base = { credentials: () => cache.current(), queue, metrics, now: Date.now };
  const handler = (deps: EventsRequestDeps) => async (r: (typeof requests)[number]) => {
    const outcome = await handleEventsRequest(deps, r.headers, r.body, 'bench');
    if (outcome.status !== 200) throw new Error(outcome.body);
  };
  const key = Buffer.from(creds.secret, 'utf8');
  const variants: [string, (r: (typeof requests)[number]) => Promise<unknown>][] = [
    ['reference: HMAC + JSON.parse', async (r) => {
      const ok = timingSafeEqual(createHmac('sha256', key).update(r.body).digest(), Buffer.from(r.headers['x-service-signature'], 'hex'));
      return ok && JSON.parse(r.body.toString('utf8'));
    }],
    ['handler, limiter and validation off', handler({ ...base, processor: acceptAll, rateLimiter: new UnlimitedRateLimiter() })],
    ['+ limiter', handler({ ...base, processor: acceptAll, rateLimiter: new LocalRateLimiter() })],
    ['+ limiter + validation and privacy', handler({ ...base, processor: createEventProcessor(), rateLimiter: new LocalRateLimiter() })],
  ];
  const results = new Map<string, number[]>();
  for (let round = 0; round < 3; round++) {
    for (const [name, run] of variants) {
      for (let i = 0; i < 5000; i++) await run(requests[i % requests.length]!);
      const before = process.cpuUsage();
      for (let i = 0; i < CALLS; i++) await run(requests[i % requests.length]!);
      const used = process.cpuUsage(before);
      results.set(name, [...(results.get(name) ?? []), (used.user + used.system) / CALLS]);
    }
  }
  for (const [name, us] of results) process.stdout.write(`${name.padEnd(38)} ${us.map((x) => x.toFixed(2)).join(' / ')} µs per call\n`);
  cache.stop();
  await storage.close();
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  },
);
