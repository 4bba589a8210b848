/**
 * One rung of the ablation ladder (ladder.ts): a server made of the HMAC+parse reference plus,
 * cumulatively, the pieces the service adds, in the order a request meets them. Every piece is the
 * service's own module, wired as service.ts wires it; a piece not yet added is the service's own
 * "off" form where one exists (UnlimitedRateLimiter, a silent pino logger) and a no-op of the same
 * interface otherwise (metrics, validator, queue). Nothing is re-implemented.
 *
 *   https       node:https + the reference handler (HMAC-SHA256 in constant time, JSON.parse)
 *   http2       the service's TLS server (createPublicTlsServer: node:http2 allowHTTP1, its
 *               timeouts, handshake bound, socket tracking) + the reference handler
 *   service     the service's request path (buildServer + handleEventsRequest): request id and
 *               response headers, pre-body checks and shedding, body budget, authentication,
 *               media types, grants, payload checks; every dependency below off
 *   log         + the request log line (pino, buffered, to stdout)
 *   metrics     + Prometheus metrics, the console's live recorder and its 1 s loop, the outcome recorder
 *   limiter     + the rate limiter (LocalRateLimiter; adds the RateLimit headers)
 *   validation  + validation and privacy (createEventProcessor)
 *   queue       + the queue hand-off and group commit (SqliteEventQueue, WAL, synchronous=FULL)
 *
 * Usage: node ladder-server.js <rung> <dataDir> <secret>   (production environment of dataDir)
 * Prints "listening <port>" on stderr when ready; the log lines (rungs from `log`) go to stdout.
 */
import { createServer } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import pino from 'pino';
import { buildServer } from '../src/http/public-server.js';
import { createPublicTlsServer } from '../src/http/public-tls-server.js';
import { openStorage } from '../src/storage/open-storage.js';
import { CredentialCache } from '../src/control/credential-cache.js';
import { loadTlsMaterial } from '../src/tls/tls-material.js';
import { createLogger } from '../src/observability/logger.js';
import { ServiceMetrics } from '../src/observability/service-metrics.js';
import { LiveRecorder, LiveStore, startLiveLoop } from '../src/live/live-stats.js';
import { QueueHealthLog } from '../src/observability/queue-health-log.js';
import { BufferedOutcomeRecorder } from '../src/analytics/buffered-outcome-recorder.js';
import { FailedAuthShedder } from '../src/rate-limit/failed-auth-shedder.js';
import { LocalRateLimiter } from '../src/rate-limit/local-rate-limiter.js';
import { UnlimitedRateLimiter } from '../src/rate-limit/unlimited-rate-limiter.js';
import { createEventProcessor } from '../src/validation/event-processor.js';
import type { EventProcessor } from '../src/validation/event-check.js';
import type { EventQueue } from '../src/queue/event-queue.js';
import { referenceHandler } from './reference-handler.js';
import { LADDER_RUNGS, type LadderRung } from './ladder-rungs.js';


/** Metrics off: the calls the request path makes, doing nothing. */
const noop = { inc() {}, observe() {} };
const METRICS_OFF = { countRequest() {}, watchBodyBudget() {}, watchConnections() {}, countDefenceClose() {}, countStreamRefused() {}, requestDuration: noop, queueAppendDuration: noop, eventsAccepted: noop, eventsRejected: noop, rateLimited: noop, piiRedactions: noop } as unknown as ServiceMetrics;

/** Validation off: every event accepted as sent. */
const accepted = (event: unknown) => ({ ok: true as const, event: event as Record<string, unknown>, meta: undefined, modified: false });
const ACCEPT_ALL: EventProcessor = { evaluate: accepted, check: accepted };

/** Queue off: acknowledged at once, stored nowhere. */
const QUEUE_OFF = {
  append: (batch) => Promise.resolve({ firstSeq: 0, count: batch.events.length }),
  read: () => Promise.resolve([]),
  health: () => ({ writable: true, lastError: null }),
  close: () => Promise.resolve(),
} as EventQueue;

async function main(): Promise<void> {
  const [rungText, dataDir, secret] = process.argv.slice(2);
  const rung = LADDER_RUNGS.indexOf(rungText as LadderRung);
  if (rung < 0 || !dataDir) throw new Error(`usage: ladder-server.js <${LADDER_RUNGS.join('|')}> <dataDir> <secret>`);
  const has = (name: LadderRung) => rung >= LADDER_RUNGS.indexOf(name);
  const tls = await loadTlsMaterial({ dataDir });
  const listening = (port: number) => process.stderr.write(`listening ${port}\n`);

  if (!has('service')) {
    const handler = referenceHandler('hmac', secret ?? '') as (req: unknown, res: unknown) => void;
    const server = has('http2')
      ? createPublicTlsServer({ cert: tls.cert, key: tls.key }).server.on('request', handler)
      : createServer({ cert: tls.cert, key: tls.key, minVersion: 'TLSv1.3', maxVersion: 'TLSv1.3' }, handler as (req: IncomingMessage, res: ServerResponse) => void);
    if (!has('http2')) (server as ReturnType<typeof createServer>).keepAliveTimeout = 65_000;
    server.listen(0, '127.0.0.1', () => listening((server.address() as { port: number }).port));
    return;
  }

  const storage = await openStorage({ dataDir, env: 'production' });
  const credentials = await CredentialCache.start(storage.controlPlane(), { intervalMs: 1000 });
  const logger = has('log') ? createLogger({ level: 'info' }) : pino({ level: 'silent' });
  const metrics = has('metrics') ? new ServiceMetrics() : METRICS_OFF;
  let observer: LiveRecorder | undefined;
  let outcomes: BufferedOutcomeRecorder | undefined;
  if (has('metrics')) {
    observer = new LiveRecorder(metrics, { testEnvironment: false });
    const store = new LiveStore({ env: 'production' });
    startLiveLoop(observer, (delta) => store.add(delta));
    outcomes = new BufferedOutcomeRecorder(storage.ingestStats({ busyTimeoutMs: 100 }));
  }
  const { server } = buildServer(
    { cert: tls.cert, key: tls.key },
    {
      credentials: () => credentials.current(),
      processor: has('validation') ? createEventProcessor() : ACCEPT_ALL,
      queue: has('queue') ? storage.openQueue(new QueueHealthLog(metrics, logger, storage.location)) : QUEUE_OFF,
      metrics,
      logger,
      rateLimiter: has('limiter') ? new LocalRateLimiter() : new UnlimitedRateLimiter(),
      failedAuth: new FailedAuthShedder({ perSecond: 10, burst: 100 }),
      now: Date.now,
      ...(outcomes ? { outcomes } : {}),
      ...(observer ? { observer } : {}),
    },
  );
  server.listen(0, '127.0.0.1', () => listening((server.address() as { port: number }).port));
}

process.on('SIGTERM', () => process.exit(0));
main().catch((error: unknown) => {
  process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
