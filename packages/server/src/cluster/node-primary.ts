/**
 * The primary of `serve --workers N`. It serves no events itself; it
 * - prepares the environment once (demo credentials, TLS certificate) so workers never race on it;
 * - holds the authoritative rate-limit buckets and answers the workers' lease requests, so limits
 *   hold for the node as a whole;
 * - runs the admin port: readiness from the workers' reports, /metrics aggregated across workers;
 * - restarts a worker that dies, and on SIGTERM stops every worker gracefully before exiting.
 */
import cluster, { type Worker } from 'node:cluster';
import type { AddressInfo } from 'node:net';
import { AggregatorRegistry } from 'prom-client';
import type { ServeConfig } from '../config.js';
import { buildAdminApp } from '../admin/admin-app.js';
import { openStorage } from '../storage/open-storage.js';
import type { IssuedKey } from '../control/control-plane.js';
import { createDemoIfFresh } from '../demo.js';
import { createLogger, type Logger } from '../observability/logger.js';
import { LeaseAuthority } from '../rate-limit/lease-authority.js';
import type { LeaseRequest, LeaseReturn } from '../rate-limit/lease-protocol.js';
import { LocalRateLimiter } from '../rate-limit/local-rate-limiter.js';
import { loadTlsMaterial } from '../tls/tls-material.js';
import { assertAdminExposure } from '../admin/admin-exposure.js';
import { StatsReader } from '../analytics/stats-reader.js';
import { LiveStore } from '../observability/live-stats.js';
import { encodeWorkerConfig, WORKER_CONFIG_ENV, type WorkerMessage } from './cluster-messages.js';

export interface RunningNode {
  readonly port: number;
  readonly adminPort: number;
  readonly certFile: string;
  readonly demoKey: IssuedKey | null;
  readonly logger: Logger;
  close(): Promise<void>;
}

interface WorkerState {
  port: number | null;
  writable: boolean;
  lastError: string | null;
}

export async function runPrimary(config: ServeConfig): Promise<RunningNode> {
  assertAdminExposure(config);
  const logger = createLogger({ level: config.logLevel });
  // Migrates the PostgreSQL schema once, before the workers open it (open-storage.ts picks the profile).
  const storage = await openStorage({ dataDir: config.dataDir, env: config.env, databaseUrl: config.databaseUrl, poolSize: 2, masterKeyFile: config.masterKeyFile });
  // A wrong, empty or missing master key stops the node here, with one line, before any worker starts.
  await storage.controlPlane().verifyMasterKey();
  const demoKey = config.demo ? await createDemoIfFresh(storage.controlPlane()) : null;
  const tls = await loadTlsMaterial({ dataDir: config.dataDir, certFile: config.tlsCert, keyFile: config.tlsKey });

  const authority = new LeaseAuthority(new LocalRateLimiter());
  const states = new Map<Worker, WorkerState>();
  let stopping = false;
  let started = false;
  let startupFailure: ((error: Error) => void) | null = null;

  const workerEnv = { [WORKER_CONFIG_ENV]: encodeWorkerConfig({ ...config, demo: false }) };
  const fork = (): Worker => {
    const worker = cluster.fork(workerEnv);
    states.set(worker, { port: null, writable: true, lastError: null });
    worker.on('message', (message: WorkerMessage | LeaseRequest | LeaseReturn) => {
      if (message.type === 'ecapi:rl-take' || message.type === 'ecapi:rl-return') {
        const reply = authority.handle(message);
        if (reply && worker.isConnected()) worker.send(reply);
        return;
      }
      const state = states.get(worker);
      if (!state) return;
      if (message.type === 'ecapi:listening') state.port = message.port;
      if (message.type === 'ecapi:live') {
        liveStore.add(message.delta);
        return;
      }
      if (message.type === 'ecapi:health') {
        state.writable = message.writable;
        state.lastError = message.lastError;
      }
    });
    worker.on('exit', (code, signal) => {
      const everListened = states.get(worker)?.port !== null;
      states.delete(worker);
      if (stopping) return;
      if (!started && !everListened) {
        // A worker that dies before it ever listened (port taken, bad certificate) would die again:
        // fail the start instead of forking forever.
        startupFailure?.(new Error(`a worker exited (code ${code}, signal ${signal}) before listening; see its error above`));
        return;
      }
      if (code === 0) {
        // A clean exit is a worker that was told to stop (a service manager signalling the whole
        // process group, say): replacing it would fight the shutdown.
        logger.info({ pid: worker.process.pid }, 'worker stopped');
        return;
      }
      logger.error({ pid: worker.process.pid, code, signal }, 'worker exited; starting a replacement');
      fork();
    });
    return worker;
  };

  const aggregator = new AggregatorRegistry();
  const statsReader = new StatsReader(storage);
  // Operator console: the workers' live deltas (IPC, every second) summed here; control plane read for the data-set pages.
  const liveStore = new LiveStore({ env: config.env });
  const consoleControlPlane = storage.controlPlane();
  const admin = buildAdminApp(
    { adminToken: config.adminToken, adminHost: config.adminHost, allowedHosts: config.adminAllowedHosts },
    {
      metrics: { contentType: aggregator.contentType, text: () => aggregator.clusterMetrics() },
      stats: (dataSetId, sinceMs) => statsReader.stats(dataSetId, sinceMs),
      console: {
        env: config.env,
        live: liveStore,
        stats: (dataSetId, sinceMs) => statsReader.stats(dataSetId, sinceMs),
        lag: () => statsReader.lag(),
        listDataSets: () => consoleControlPlane.listDataSets(),
        listKeys: () => consoleControlPlane.listKeys(),
        processes: () => states.size,
      },
      readiness: () => {
        const all = [...states.values()];
        const listening = all.length === config.workers && all.every((s) => s.port !== null);
        const writable = all.every((s) => s.writable);
        const error = all.find((s) => s.lastError)?.lastError;
        return {
          ready: !stopping && listening && writable,
          checks: { listening, queue_writable: writable, workers: all.length, ...(error ? { queue_error: error } : {}) },
        };
      },
    },
  );

  for (let i = 0; i < config.workers; i++) fork();
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('workers did not start within 30 s')), 30_000);
    startupFailure = (error) => {
      clearTimeout(timer);
      cluster.off('message', check);
      stopping = true;
      for (const worker of states.keys()) worker.process.kill('SIGTERM');
      reject(error);
    };
    const check = () => {
      const all = [...states.values()];
      if (all.length === config.workers && all.every((s) => s.port !== null)) {
        clearTimeout(timer);
        cluster.off('message', check);
        started = true;
        resolve(all[0]!.port!);
      }
    };
    cluster.on('message', check);
  });
  await admin.listen({ port: config.adminPort, host: config.adminHost });
  const adminPort = (admin.server.address() as AddressInfo).port;
  logger.info({ env: config.env, port, admin_port: adminPort, host: config.host, workers: config.workers }, 'ecapi-ingest listening');
  logger.flush(); // operators and scripts wait for this line

  let closing: Promise<void> | null = null;
  return {
    port,
    adminPort,
    certFile: tls.certFile,
    demoKey,
    logger,
    close() {
      closing ??= (async () => {
        stopping = true;
        await Promise.all(
          [...states.keys()].map(
            (worker) =>
              new Promise<void>((resolve) => {
                if (worker.isDead()) return resolve();
                worker.once('exit', () => resolve());
                worker.process.kill('SIGTERM');
              }),
          ),
        );
        await admin.close();
        await statsReader.close();
        await consoleControlPlane.close();
        await storage.close();
        logger.info('ecapi-ingest stopped');
        logger.flush();
      })();
      return closing;
    },
  };
}
