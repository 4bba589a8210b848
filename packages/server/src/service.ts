/**
 * One serving process: control plane + credential cache, durable queue, event processor, rate
 * limiting, public TLS server and (unless it is a worker of a multi-process node) the admin app.
 * What a node sets up once (storage, master key, demo, TLS, the admin side) comes from
 * serving-node.ts, shared with the primary of `serve --workers N` (cluster/node-primary.ts). `startService` is what `ecapi-ingest serve` runs and what in-process tests use; it
 * listens and returns a handle to stop it cleanly.
 */
import type { AddressInfo } from 'node:net';
import type { ServeConfig } from './config.js';
import { CredentialCache } from './control/credential-cache.js';
import { buildServer, type PublicServer } from './http/public-server.js';
import { createLogger, type Logger } from './observability/logger.js';
import { ServiceMetrics } from './observability/service-metrics.js';
import { QueueHealthLog } from './observability/queue-health-log.js';
import type { QueueHealth } from './queue/event-queue.js';
import { FailedAuthShedder } from './rate-limit/failed-auth-shedder.js';
import { LocalRateLimiter } from './rate-limit/local-rate-limiter.js';
import { UnlimitedRateLimiter } from './rate-limit/unlimited-rate-limiter.js';
import type { RateLimiter } from './rate-limit/rate-limiter.js';
import type { IngestOutcomeRecorder } from './analytics/ingest-outcome-recorder.js';
import { BufferedOutcomeRecorder } from './analytics/buffered-outcome-recorder.js';
import { registerConsumerLagGauges, StatsReader } from './analytics/stats-reader.js';
import { DiskMonitor } from './lifecycle/disk-usage.js';
import { LiveRecorder, startLiveLoop } from './live/live-recorder.js';
import { LiveStore } from './live/live-store.js';
import { createEventProcessor } from './validation/event-processor.js';
import { abandonStart, announceListening, buildNodeAdmin, openNode, startedNode, type RunningNode } from './serving-node.js';
import { listenFailure } from './http/listen-failure.js';

export interface RunningService extends RunningNode {
  readonly metrics: ServiceMetrics;
  /** Live figures for the operator console; a worker sends them to its primary every second. */
  readonly live: LiveRecorder;
  queueHealth(): QueueHealth;
}

export interface ServiceOptions {
  readonly logger?: Logger;
  /** 'worker': one of several processes of a node; the primary owns the admin port and the limits. */
  readonly role?: 'single' | 'worker';
  /**
   * The node's limiter (a worker's lease client of its primary). Used unless the storage provides
   * a cluster-wide one (PostgreSQL profile); a function is called only when it is used.
   */
  readonly rateLimiter?: RateLimiter | (() => RateLimiter);
  readonly outcomes?: IngestOutcomeRecorder;
}

export async function startService(config: ServeConfig, options: ServiceOptions = {}): Promise<RunningService> {
  const role = options.role ?? 'single';
  const logger = options.logger ?? createLogger({ level: config.logLevel });
  const metrics = new ServiceMetrics();
  const node = await openNode(config, logger, { role: role === 'single' ? 'node' : 'worker' });
  const { storage, controlPlane, tls } = node;
  const credentials = await CredentialCache.start(controlPlane, {
    intervalMs: config.controlPollMs,
    onChange: (snapshot) => {
      metrics.credentialsVersion.set(snapshot.version);
      logger.info({ version: snapshot.version, keys: snapshot.keys.size, data_sets: snapshot.dataSets.size }, 'control plane loaded');
    },
    // Once per change (control/credential-cache.ts), not at every poll of an outage.
    onError: (error) => logger.warn({ err: { message: error.message } }, 'control plane poll failed: serving with the keys, grants and policies last loaded until it answers again'),
    onRecovered: () => logger.info('control plane poll recovered'),
  });
  // Metrics and readiness see every commit; the log sees each change of the queue's health once.
  const queue = storage.openQueue(new QueueHealthLog(metrics, logger, storage.location));
  const nodeLimiter = () => (typeof options.rateLimiter === 'function' ? options.rateLimiter() : options.rateLimiter) ?? new LocalRateLimiter();
  const rateLimiter =
    config.rateLimit === false
      ? new UnlimitedRateLimiter()
      : (storage.clusterRateLimiter({
          // Once per change, not per request (rate-limit/postgres-lease-channel.ts).
          onError: (error) => logger.warn({ err: { message: error.message } }, 'rate-limit lease failed: requests are admitted without the cluster-wide limits until the database answers again'),
          onRecovered: () => logger.info('rate-limit leases recovered'),
        }) ?? nodeLimiter());
  const failedAuth = new FailedAuthShedder({ perSecond: config.failedAuthPerSecond, burst: config.failedAuthBurst });
  // Analytics (asynchronous side): ingest outcomes recorded off the hot path; stats and consumer lag read from the files.
  const outcomes = options.outcomes ?? new BufferedOutcomeRecorder(
    storage.ingestStats({ busyTimeoutMs: 100 }),
    {
      onError: (error) => logger.warn({ err: { message: error.message } }, 'ingest stats flush failed: rejection counts are kept in memory and written when it succeeds'),
      onRecovered: () => logger.info('ingest stats flush recovered'),
    },
  );
  const statsReader = new StatsReader(storage);
  registerConsumerLagGauges(metrics.registry, statsReader);
  // Bytes per store and free bytes on /metrics (every serving process: the primary's /metrics sums
  // theirs, `max` keeps one); the low-space warning and the console in the process with the admin port.
  const diskGauges = new DiskMonitor({ dataDir: config.dataDir, backend: storage.lifecycle(), logger });
  diskGauges.registerGauges(metrics.registry);
  const disk = role === 'single' ? diskGauges : null;
  disk?.start();
  // Operator console: live figures from this process (test events only with --env test).
  const live = new LiveRecorder(metrics, { testEnvironment: config.env === 'test' });
  const liveStore = role === 'single' ? new LiveStore({ env: config.env }) : null;
  const stopLive = liveStore ? startLiveLoop(live, (delta) => liveStore.add(delta)) : () => undefined;

  const publicServer: PublicServer = buildServer(
    {
      cert: tls.cert,
      key: tls.key,
      headersTimeoutMs: config.headersTimeoutMs,
      requestTimeoutMs: config.requestTimeoutMs,
      keepAliveTimeoutMs: config.keepAliveTimeoutMs,
      // Absent ones take buildServer's and createPublicTlsServer's defaults (`??`).
      bodyBudgetBytes: config.bodyBudgetBytes,
      handshakeTimeoutMs: config.handshakeTimeoutMs,
      maxPendingHandshakes: config.maxPendingHandshakes,
      maxConnections: config.maxConnections,
      bodyIdleTimeoutMs: config.bodyIdleTimeoutMs,
      minBodyBytesPerSecond: config.minBodyBytesPerSecond,
      proxyProtocolFrom: config.proxyProtocolFrom,
    },
    {
      credentials: () => credentials.current(),
      processor: createEventProcessor(),
      queue,
      metrics,
      logger,
      rateLimiter,
      failedAuth,
      now: Date.now,
      outcomes,
      observer: live,
    },
  );

  let accepting = false;
  const admin =
    role === 'single'
      ? buildNodeAdmin(config, controlPlane, {
          metrics: { contentType: metrics.registry.contentType, text: () => metrics.registry.metrics() },
          readiness: () => {
            const health = queue.health();
            return {
              ready: accepting && health.writable,
              checks: { listening: accepting, queue_writable: health.writable, ...(health.lastError ? { queue_error: health.lastError } : {}) },
            };
          },
          processes: () => 1,
          liveStore: liveStore!,
          statsReader,
          lifecycle: storage.lifecycle(),
          logger,
          ...(disk ? { disk } : {}),
        })
      : null;

  // Everything above is released in this order on a graceful stop, and also when a port cannot be
  // bound: `serve` then exits with one line and nothing is left half up (issue 29).
  const release = async () => {
    accepting = false;
    credentials.stop();
    stopLive();
    await publicServer.shutdown();
    await queue.close();
    if (!options.outcomes) await outcomes.close();
    disk?.stop();
    await statsReader.close();
    rateLimiter.close();
    failedAuth.close();
    await admin?.close();
    await storage.close();
  };
  let adminPort = 0;
  try {
    await new Promise<void>((resolve, reject) => {
      // `on`, not `once`: under node:cluster a failed listen can be reported more than once, and an
      // 'error' event without a listener would crash the process instead of failing the start.
      const failed = (error: Error) => reject(listenFailure(error, config.host, config.port, 'public port'));
      publicServer.server.on('error', failed);
      publicServer.server.listen(config.port, config.host, () => {
        publicServer.server.off('error', failed);
        resolve();
      });
    });
    publicServer.server.on('error', (error: Error) => logger.error({ err: { message: error.message } }, 'public server error'));
    if (admin) adminPort = await admin.listen().catch((error: unknown) => Promise.reject(listenFailure(error, config.adminHost, config.adminPort, 'admin port')));
  } catch (error) {
    return abandonStart(error, release, logger); // the listen error is the one to report
  }
  accepting = true;
  const port = (publicServer.server.address() as AddressInfo).port;
  if (role === 'single') announceListening(logger, { env: config.env, port, admin_port: adminPort, host: config.host, storage: storage.location }, { config, port, adminPort });
  else logger.flush();

  return {
    ...startedNode(node, logger, { port, adminPort }, release, role === 'single'),
    metrics,
    live,
    queueHealth: () => queue.health(),
  };
}
