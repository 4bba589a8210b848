/**
 * Service configuration and the data-dir layout.
 *
 *   <data-dir>/master.key                 master key for secrets at rest (0600), unless ECAPI_MASTER_KEY
 *   <data-dir>/tls/localhost-*.pem        generated self-signed certificate (when no --tls-cert)
 *   <data-dir>/<env>/control.db           data sets, keys (sealed), grants, policies
 *   <data-dir>/<env>/queue.db             the durable event queue
 *   <data-dir>/<env>/view.db              merged view, identities, analytics, consumer offset
 *   <data-dir>/<env>/ingest-stats.db      ingest outcome counts (accepted / rejected by reason)
 *
 * `<env>` is `production` or `test`: two fully separate environments (credentials, queue, ports)
 * that share nothing but the master key and the certificate.
 *
 * With --database-url (the scale-out profile) the four .db files are replaced by one PostgreSQL
 * schema per environment (storage/open-storage.ts); the data dir keeps the master key and TLS files.
 */
import { join } from 'node:path';

export type Environment = 'production' | 'test';
export const ENVIRONMENTS: readonly Environment[] = ['production', 'test'];

export interface ServeConfig {
  readonly dataDir: string;
  readonly env: Environment;
  readonly host: string;
  readonly port: number;
  readonly adminHost: string;
  readonly adminPort: number;
  readonly demo: boolean;
  readonly tlsCert?: string | undefined;
  readonly tlsKey?: string | undefined;
  readonly adminToken?: string | undefined;
  /** Host names the admin port answers for besides IP literals, localhost and --admin-host (admin-guard.ts). */
  readonly adminAllowedHosts?: readonly string[] | undefined;
  /** How often the server checks the control plane for changes. */
  readonly controlPollMs: number;
  readonly headersTimeoutMs?: number;
  readonly requestTimeoutMs?: number;
  readonly keepAliveTimeoutMs?: number;
  /** Request-body bytes one serving process holds at once (http/body-budget.ts). */
  readonly bodyBudgetBytes?: number;
  /** TLS handshake timeout of the public port (http/public-server.ts). */
  readonly handshakeTimeoutMs?: number;
  /** Connections mid-handshake per serving process; past it the oldest is dropped. */
  readonly maxPendingHandshakes?: number;
  /** Established connections per serving process; past it the oldest not yet authenticated is dropped (http/public-tls-server.ts). */
  readonly maxConnections?: number;
  /** A request whose body sends nothing for this long is dropped. */
  readonly bodyIdleTimeoutMs?: number;
  /** Minimum average body rate of untrusted requests after bodyIdleTimeoutMs; 0 turns it off. */
  readonly minBodyBytesPerSecond?: number;
  /** --proxy-protocol: addresses/CIDRs of balancers whose PROXY headers are believed (http/connection-front.ts). */
  readonly proxyProtocolFrom?: readonly string[];
  readonly logLevel?: string;
  /** Serving processes; 1 runs everything in this process. */
  readonly workers: number;
  /** Pre-authentication shedding per client address. */
  readonly failedAuthPerSecond: number;
  readonly failedAuthBurst: number;
  /** False with --no-rate-limit: data-set limits are not enforced (quotas live elsewhere). */
  readonly rateLimit?: boolean;
  /** postgres://… (--database-url, ECAPI_DATABASE_URL): all storage in PostgreSQL; absent: embedded SQLite. */
  readonly databaseUrl?: string | undefined;
  /** --master-key-file (ECAPI_MASTER_KEY_FILE): the master key from a mounted secret instead of <data-dir>/master.key. */
  readonly masterKeyFile?: string | undefined;
}

export const DEFAULT_PORTS: Record<Environment, { port: number; adminPort: number }> = {
  production: { port: 8443, adminPort: 9464 },
  test: { port: 9443, adminPort: 9465 },
};

export function parseEnvironment(value: string): Environment {
  if (value === 'production' || value === 'test') return value;
  throw new Error(`invalid environment "${value}": use production or test`);
}

export function environmentDir(dataDir: string, env: Environment): string {
  return join(dataDir, env);
}

export function controlDbFile(dataDir: string, env: Environment): string {
  return join(environmentDir(dataDir, env), 'control.db');
}

export function queueDbFile(dataDir: string, env: Environment): string {
  return join(environmentDir(dataDir, env), 'queue.db');
}

/** The merged view, identities, view analytics and the consumer offset (written by the consumer). */
export function viewDbFile(dataDir: string, env: Environment): string {
  return join(environmentDir(dataDir, env), 'view.db');
}

/** Ingest outcome counts (accepted, rejected by reason), written by the serving processes. */
export function ingestStatsDbFile(dataDir: string, env: Environment): string {
  return join(environmentDir(dataDir, env), 'ingest-stats.db');
}
