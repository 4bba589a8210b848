/**
 * The composition root shared by both ways a node serves: one process (service.ts) or a primary
 * with worker processes (cluster/node-primary.ts). What a node does once, whatever its shape, is
 * here, so the two starts cannot drift apart:
 * - openNode: admin exposure checked, storage opened (open-storage.ts picks the profile), the master
 *   key checked against the control plane, demo credentials on a fresh environment, TLS material.
 *   A worker process of a node opens the same storage but leaves the node-wide steps to its primary.
 * - buildNodeAdmin: the admin port (health, readiness, metrics, stats, operator console) over the
 *   node's control plane and StatsReader; only the metrics, readiness and process count differ.
 * - abandonStart and startedNode: what both do when their start fails (release everything opened,
 *   then throw the start's own error), and the handle both return (its close releases once, however
 *   often asked).
 */
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { DEFAULT_PORTS, type ServeConfig } from './config.js';
import { readListeningRecord, writeListeningRecord } from './listening-record.js';
import { buildAdminApp, type AdminAppDeps, type MetricsSource } from './admin/admin-app.js';
import { assertAdminExposure } from './admin/admin-exposure.js';
import type { StatsReader } from './analytics/stats-reader.js';
import type { ControlPlane, IssuedKey } from './control/control-plane.js';
import { createDemoIfFresh } from './demo.js';
import type { Logger } from './observability/logger.js';
import type { LiveStore } from './live/live-store.js';
import { ConsoleDeletions } from './live/console-deletions.js';
import type { DiskMonitor } from './lifecycle/disk-usage.js';
import type { LifecycleBackend } from './lifecycle/lifecycle-backend.js';
import { openStorage } from './storage/open-storage.js';
import type { Storage } from './storage/storage.js';
import { loadTlsMaterial, type TlsMaterial } from './tls/tls-material.js';

export interface OpenedNode {
  readonly storage: Storage;
  readonly controlPlane: ControlPlane;
  readonly tls: TlsMaterial;
  /** Set on the first run of a fresh environment with the demo enabled (never in a worker process). */
  readonly demoKey: IssuedKey | null;
}

/**
 * `role`: 'node' for the process that owns the node (single process, or the primary), 'worker' for
 * one of the primary's serving processes. `poolSize`: connections of the main pool (PostgreSQL).
 */
export async function openNode(config: ServeConfig, logger: Logger, options: { role: 'node' | 'worker'; poolSize?: number }): Promise<OpenedNode> {
  const node = options.role === 'node';
  if (node) assertAdminExposure(config);
  // Migrates the PostgreSQL schema once per start, before any worker opens it.
  const storage = await openStorage({
    dataDir: config.dataDir,
    env: config.env,
    databaseUrl: config.databaseUrl,
    masterKeyFile: config.masterKeyFile,
    poolSize: options.poolSize,
  });
  try {
    if (node) {
      const warning = await storage.durabilityWarning();
      if (warning) logger.warn({ storage: storage.location }, warning);
    }
    const controlPlane = storage.controlPlane();
    // A wrong, empty or missing master key stops the start here, with one line.
    await controlPlane.verifyMasterKey();
    const demoKey = node && config.demo ? await createDemoIfFresh(controlPlane) : null;
    const tls = await loadTlsMaterial({ dataDir: config.dataDir, certFile: config.tlsCert, keyFile: config.tlsKey });
    return { storage, controlPlane, tls, demoKey };
  } catch (error) {
    await storage.close().catch(() => undefined);
    throw error;
  }
}

export interface NodeAdminSources {
  /** This process's registry, or the aggregate of the node's workers. */
  readonly metrics: MetricsSource;
  readonly readiness: AdminAppDeps['readiness'];
  /** Serving processes of the node, for the console. */
  readonly processes: () => number;
  readonly liveStore: LiveStore;
  readonly statsReader: StatsReader;
  /** Free space, bytes per store, a data set's view (lifecycle/disk-usage.ts); the process with the admin port. */
  readonly disk?: DiskMonitor;
  /**
   * Where deletion requests are recorded: the admin process follows them so that a deletion reaches
   * the console's memory too, the recent rejections and the test environment's list
   * (live/console-deletions.ts).
   */
  readonly lifecycle?: LifecycleBackend;
  readonly logger?: Logger;
}

export interface NodeAdmin {
  readonly app: FastifyInstance;
  /** Listens on the admin address; resolves with the port. */
  listen(): Promise<number>;
  close(): Promise<void>;
}

/** How long a read of the console's entries waits for the deletion requests to be read (live/console-deletions.ts). */
const DELETIONS_SYNC_WAIT_MS = 2_000;

export function buildNodeAdmin(config: ServeConfig, controlPlane: ControlPlane, sources: NodeAdminSources): NodeAdmin {
  const { statsReader } = sources;
  const deletions = sources.lifecycle ? new ConsoleDeletions(sources.liveStore, sources.lifecycle, sources.logger) : null;
  const stats = (dataSetId: string, sinceMs: number) => statsReader.stats(dataSetId, sinceMs);
  const app = buildAdminApp(
    { adminToken: config.adminToken, adminHost: config.adminHost, allowedHosts: config.adminAllowedHosts },
    {
      metrics: sources.metrics,
      // Unknown data sets are errors (404), not zeros.
      stats: async (dataSetId, sinceMs) => ((await controlPlane.listDataSets()).some((d) => d.id === dataSetId) ? stats(dataSetId, sinceMs) : null),
      console: {
        env: config.env,
        live: sources.liveStore,
        ...(deletions ? { syncDeletions: () => deletions.syncWithin(DELETIONS_SYNC_WAIT_MS) } : {}),
        stats,
        lag: () => statsReader.lag(),
        listDataSets: () => controlPlane.listDataSets(),
        listKeys: () => controlPlane.listKeys(),
        processes: sources.processes,
        otherEnvironment: () => {
          const other = config.env === 'test' ? 'production' : 'test';
          const running = readListeningRecord(config.dataDir, other);
          return { env: other, running: running !== null, admin_port: running?.admin_port ?? DEFAULT_PORTS[other].adminPort, admin_host: running?.admin_host ?? null };
        },
        ...(sources.disk ? { disk: sources.disk } : {}),
      },
      readiness: sources.readiness,
    },
  );
  return {
    app,
    async listen() {
      await app.listen({ port: config.adminPort, host: config.adminHost });
      deletions?.start();
      return (app.server.address() as AddressInfo).port;
    },
    async close() {
      await deletions?.stop();
      await app.close();
    },
  };
}

/** The line operators and scripts wait for, written out at once. */
export function announceListening(logger: Logger, fields: Record<string, unknown>, record?: { config: ServeConfig; port: number; adminPort: number }): void {
  // For the other environment's console: where this one's admin port really is (listening-record.ts).
  if (record) {
    const { config } = record;
    writeListeningRecord(config.dataDir, config.env, { pid: process.pid, port: record.port, admin_port: record.adminPort, admin_host: config.adminHost });
  }
  logger.info(fields, 'ecapi-ingest listening');
  logger.flush();
}

/** A graceful stop that runs once, however often (and from however many signals) it is asked for. */
function closeOnce(close: () => Promise<void>): () => Promise<void> {
  let closing: Promise<void> | null = null;
  return () => (closing ??= close());
}

/**
 * A start that failed (a port that cannot be bound, workers that did not start): everything opened
 * is released, and the start's own error is the one thrown, not a later one from the release.
 */
export async function abandonStart(error: unknown, release: () => Promise<void>, logger: Logger): Promise<never> {
  await release().catch(() => undefined);
  logger.flush();
  throw error;
}

/** A started node, as its caller holds it: single process (service.ts) or primary (cluster/node-primary.ts). */
export interface RunningNode {
  readonly port: number;
  /** 0 for a worker process, which has no admin port of its own. */
  readonly adminPort: number;
  readonly certFile: string;
  /** Set on the first run of a fresh environment with the demo enabled. */
  readonly demoKey: IssuedKey | null;
  readonly logger: Logger;
  /** Graceful stop, run once however often asked: `release` closes everything in its order. */
  close(): Promise<void>;
}

/**
 * The handle of a node that started. Its close() runs `release` once; a process that owns the node
 * (`announce`) then says it stopped; the log is flushed last.
 */
export function startedNode(node: OpenedNode, logger: Logger, ports: { port: number; adminPort: number }, release: () => Promise<void>, announce: boolean): RunningNode {
  return {
    port: ports.port,
    adminPort: ports.adminPort,
    certFile: node.tls.certFile,
    demoKey: node.demoKey,
    logger,
    close: closeOnce(async () => {
      await release();
      if (announce) logger.info('ecapi-ingest stopped');
      logger.flush();
    }),
  };
}
