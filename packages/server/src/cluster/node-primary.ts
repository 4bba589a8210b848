/**
 * The primary of `serve --workers N`. It serves no events itself; like a single-process node it
 * opens the node and its admin side through serving-node.ts (the one composition root of a node); it
 * - prepares the environment once (demo credentials, TLS certificate) so workers never race on it;
 * - holds the authoritative rate-limit buckets and answers the workers' lease requests, so limits
 *   hold for the node as a whole;
 * - runs the admin port: readiness from the workers' reports, /metrics aggregated across workers;
 * - restarts a worker that dies, and on SIGTERM stops every worker gracefully before exiting.
 */
import cluster, { type Worker } from 'node:cluster';
import { AggregatorRegistry } from 'prom-client';
import type { ServeConfig } from '../config.js';
import { createLogger } from '../observability/logger.js';
import { LeaseAuthority } from '../rate-limit/lease-authority.js';
import type { LeaseRequest, LeaseReturn } from '../rate-limit/lease-protocol.js';
import { LocalRateLimiter } from '../rate-limit/local-rate-limiter.js';
import { StatsReader } from '../analytics/stats-reader.js';
import { LiveStore } from '../live/live-store.js';
import { abandonStart, announceListening, buildNodeAdmin, openNode, startedNode, type RunningNode } from '../serving-node.js';
import { DiskMonitor } from '../lifecycle/disk-usage.js';
import { listenFailure } from '../http/listen-failure.js';
import { encodeWorkerConfig, WORKER_CONFIG_ENV, type WorkerMessage } from './cluster-messages.js';

export type { RunningNode } from '../serving-node.js';

interface WorkerState {
  port: number | null;
  writable: boolean;
  lastError: string | null;
}

export async function runPrimary(config: ServeConfig): Promise<RunningNode> {
  const logger = createLogger({ level: config.logLevel });
  // Once for the node, before any worker starts: migrations, the master-key check, demo, TLS.
  const node = await openNode(config, logger, { role: 'node', poolSize: 2 });
  const { storage, controlPlane } = node;

  const authority = new LeaseAuthority(new LocalRateLimiter());
  const states = new Map<Worker, WorkerState>();
  let stopping = false;
  let started = false;
  let startupFailure: ((error: Error) => void) | null = null;
  /** What the first worker that failed to start said (its own line, passed over IPC). */
  let workerFailure: string | null = null;

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
      if (message.type === 'ecapi:start-failed') {
        workerFailure ??= message.message;
        if (!started) startupFailure?.(new Error(workerFailure));
      }
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
        startupFailure?.(new Error(workerFailure ?? `a worker exited (code ${code}, signal ${signal}) before listening`));
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
  // Free space and bytes per store for the console, the low-space warning (lifecycle/disk-usage.ts).
  const disk = new DiskMonitor({ dataDir: config.dataDir, backend: storage.lifecycle(), logger });
  disk.start();
  // Operator console: the workers' live deltas (IPC, every second) summed here; control plane read for the data-set pages.
  const liveStore = new LiveStore({ env: config.env });
  const admin = buildNodeAdmin(config, controlPlane, {
    metrics: { contentType: aggregator.contentType, text: () => aggregator.clusterMetrics() },
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
    processes: () => states.size,
    liveStore,
    statsReader,
    disk,
    lifecycle: storage.lifecycle(),
    logger,
  });

  /** Stops the workers (gracefully), then the admin port and the stores: on SIGTERM, and when the start fails. */
  const release = async () => {
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
    disk.stop();
    await statsReader.close();
    await storage.close();
  };
  // The admin port first: when it cannot be bound, no worker is started at all (issue 29). Readiness
  // says "not ready" until every worker listens.
  let adminPort: number;
  let port: number;
  try {
    adminPort = await admin.listen().catch((error: unknown) => Promise.reject(listenFailure(error, config.adminHost, config.adminPort, 'admin port')));
    for (let i = 0; i < config.workers; i++) fork();
    port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('workers did not start within 30 s')), 30_000);
      startupFailure = (error) => {
        clearTimeout(timer);
        cluster.off('message', check);
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
  } catch (error) {
    return abandonStart(error, release, logger); // the start's error is the one to report
  }
  announceListening(logger, { env: config.env, port, admin_port: adminPort, host: config.host, workers: config.workers }, { config, port, adminPort });

  return startedNode(node, logger, { port, adminPort }, release, true);
}
