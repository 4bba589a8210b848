/**
 * `ecapi-ingest`, the operator CLI, as a function: main(argv, io) -> exit code. The bin shim calls
 * it with the process's argv and streams; tests call it in-process and parse its --json output.
 *
 * Contract: commands that print data print one JSON document with --json; a failing command exits
 * non-zero with exactly one line on stderr; every command works while the server runs (they open
 * the same SQLite files, in WAL mode, with a busy timeout).
 */
import { Command, CommanderError, Option } from 'commander';
import cluster from 'node:cluster';
import { availableParallelism } from 'node:os';
import { defaultServingProcesses } from '../cluster/default-serving-processes.js';
import { resolve } from 'node:path';
import { DEFAULT_PORTS, parseEnvironment, type Environment, type ServeConfig } from '../config.js';
import {
  MAX_POLICY_WINDOW_SECONDS,
  MAX_ROTATION_GRACE_MS,
  type ControlPlane,
  type DataSetRecord,
  type KeyRecord,
  type PolicyPatch,
} from '../control/control-plane.js';
import { formatDurationMs, isoOrNull, parseDurationMs, parseWholeSeconds } from '../control/duration.js';
import { migrateStorage, openStorage, validateDatabaseUrl } from '../storage/open-storage.js';
import { demoBanner } from '../demo.js';
import { decodeWorkerConfig, WORKER_CONFIG_ENV } from '../cluster/cluster-messages.js';
import { DEFAULT_FAILED_AUTH_LIMITS } from '../rate-limit/failed-auth-shedder.js';
import { CliError, OutputClosedError, processIo, watchOutput, writeWithBackpressure, type CliIo } from './cli-io.js';
import type { CliContext, GlobalOptions } from './cli-context.js';
import type { Storage } from '../storage/storage.js';
import { registerViewCommands } from './view-commands.js';
import { startConsumerSupervisor, type ConsumerSupervisor } from '../consumer/consumer-supervisor.js';
import { registerSendCommand } from './send-command.js';


function parsePort(value: string): number {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new CliError(`invalid port "${value}"`);
  return port;
}

function parseNonNegativeInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new CliError(`invalid number "${value}": expected a whole number`);
  return n;
}

// Never throws, whatever a stored row holds: a listing must not fail for one out-of-range time.
const iso = isoOrNull;

function dataSetJson(record: DataSetRecord) {
  const { policy } = record;
  return {
    id: record.id,
    created_at: iso(record.createdAt),
    policy: {
      consent: policy.consent,
      ip: policy.ip,
      pii_scan: policy.piiScan,
      max_age: formatDurationMs(policy.maxAgeSeconds * 1000),
      merge_window: formatDurationMs(policy.mergeWindowMs),
      version: policy.version,
    },
    limits: {
      rps: record.limits.rps,
      burst_rps: record.limits.burstRps,
      burst_seconds: record.limits.burstSeconds,
      eps: record.limits.eps,
    },
  };
}

function parsePositive(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new CliError(`invalid number "${value}": expected a positive number`);
  return n;
}

function keyJson(record: KeyRecord) {
  return {
    key_id: record.keyId,
    data_sets: record.dataSets,
    created_at: iso(record.createdAt),
    rotated_at: iso(record.rotatedAt),
    previous_secret_valid_until: iso(record.previousSecretValidUntil),
    revoked_at: iso(record.revokedAt),
    status: record.revokedAt !== null ? 'revoked' : 'active',
  };
}

function oneOf<T extends string>(name: string, allowed: readonly T[]) {
  return (value: string): T => {
    if (!(allowed as readonly string[]).includes(value)) throw new CliError(`invalid ${name} "${value}": use ${allowed.join(', ')}`);
    return value as T;
  };
}

type CommandModule = (program: Command, ctx: CliContext) => void;

/** Command groups kept in their own files; each adds its commands to the program. */
const commandModules: CommandModule[] = [registerSendCommand, registerViewCommands];

export async function main(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  const out = (text: string) => io.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
  // A reader that closes early (`| head`) ends the command quietly instead of with a stack trace.
  watchOutput(io.stdout);
  let exitCode = 0;
  let serveDone: Promise<void> | null = null;

  const program = new Command('ecapi-ingest')
    .description('ECAPI 1.0 event ingestion service and operator CLI')
    .addOption(new Option('--data-dir <dir>', 'data directory').env('ECAPI_DATA_DIR').default('./data'))
    .addOption(new Option('--env <env>', 'environment: production or test').env('ECAPI_ENV').default('production'))
    .addOption(new Option('--database-url <url>', 'postgres://… : keep everything in PostgreSQL (scale-out profile); default: embedded SQLite in the data dir').env('ECAPI_DATABASE_URL'))
    .addOption(new Option('--master-key-file <path>', 'read the master key from this file (a mounted secret) instead of <data-dir>/master.key').env('ECAPI_MASTER_KEY_FILE'))
    .option('--json', 'print one JSON document', false)
    .exitOverride()
    .configureOutput({
      writeOut: (text) => io.stdout.write(text),
      writeErr: (text) => io.stderr.write(text),
      outputError: (text, write) => write(text.split('\n')[0]!.trim() + '\n'),
    });

  const globals = (): GlobalOptions => {
    const opts = program.opts<{ dataDir: string; env: string; json: boolean; databaseUrl?: string; masterKeyFile?: string }>();
    validateDatabaseUrl(opts.databaseUrl);
    return {
      dataDir: resolve(opts.dataDir),
      env: parseEnvironment(opts.env),
      json: opts.json,
      databaseUrl: opts.databaseUrl || undefined,
      masterKeyFile: opts.masterKeyFile ? resolve(opts.masterKeyFile) : undefined,
    };
  };

  const withStorage = async <T>(fn: (storage: Storage, g: GlobalOptions) => Promise<T>): Promise<T> => {
    const g = globals();
    const storage = await openStorage({ dataDir: g.dataDir, env: g.env, databaseUrl: g.databaseUrl, poolSize: 2, masterKeyFile: g.masterKeyFile });
    try {
      return await fn(storage, g);
    } finally {
      await storage.close();
    }
  };

  const withControl = <T>(fn: (cp: ControlPlane, g: GlobalOptions) => Promise<T>): Promise<T> =>
    withStorage((storage, g) => fn(storage.controlPlane(), g));

  const ctx: CliContext = {
    io,
    out,
    globals,
    withControl,
    withStorage,
    keepAlive: (done) => {
      serveDone = done;
    },
    setExitCode: (code) => {
      exitCode = code;
    },
  };

  // serve
  program
    .command('serve')
    .description('run the ingestion service (public HTTPS port and admin port)')
    .addOption(new Option('--host <host>', 'public interface').env('ECAPI_HOST').default('127.0.0.1'))
    .addOption(new Option('--port <port>', 'public HTTPS port (default 8443; 9443 with --env test)').env('ECAPI_PORT'))
    .addOption(new Option('--admin-host <host>', 'admin interface').env('ECAPI_ADMIN_HOST').default('127.0.0.1'))
    .addOption(new Option('--admin-port <port>', 'admin HTTP port (default 9464; 9465 with --env test)').env('ECAPI_ADMIN_PORT'))
    .addOption(new Option('--admin-token <token>', 'token required on the admin port off loopback (at least 32 characters)').env('ECAPI_ADMIN_TOKEN'))
    .addOption(new Option('--admin-allowed-hosts <names>', 'comma-separated Host names the admin port answers for, besides IP addresses, localhost and --admin-host').env('ECAPI_ADMIN_ALLOWED_HOSTS'))
    .option('--no-demo', 'do not create the demo data set and key on a fresh data dir')
    .option('--no-worker', 'do not run the merged-view consumer (run `ecapi-ingest worker` separately)')
    .option('--tls-cert <file>', 'PEM certificate chain (default: generated self-signed for localhost)')
    .option('--tls-key <file>', 'PEM private key')
    .option('--control-poll <duration>', 'how often to pick up control-plane changes', '1s')
    .addOption(new Option('--workers <n>', 'serving processes (default: one per CPU core, less one for the consumer unless --no-worker; at least 1)').env('ECAPI_WORKERS'))
    .option('--failed-auth-rps <n>', 'failed authentications per second one client address may sustain', String(DEFAULT_FAILED_AUTH_LIMITS.perSecond))
    .option('--no-rate-limit', 'do not enforce data-set rate limits (when a gateway in front enforces quotas)')
    .option('--failed-auth-burst <n>', 'failed authentications one client address may burst before it gets 429', String(DEFAULT_FAILED_AUTH_LIMITS.burst))
    .option('--headers-timeout <duration>', 'a request\'s headers must arrive within this', '10s')
    .option('--request-timeout <duration>', 'a whole request (headers and body) must arrive within this', '30s')
    .option('--keep-alive-timeout <duration>', 'idle connections are closed after this', '65s')
    .option('--body-buffer <MiB>', 'request-body bytes one serving process holds at once; later bodies wait unread', '16')
    .option('--handshake-timeout <duration>', 'a TLS handshake must complete within this', '10s')
    .option('--max-pending-handshakes <n>', 'connections mid-handshake per serving process; past it the oldest is dropped', '1024')
    .option('--body-idle-timeout <duration>', 'a request whose body sends nothing for this long is dropped', '10s')
    .option('--min-body-rate <KiB/s>', 'bodies on connections not yet authenticated must average this after --body-idle-timeout (0: off)', '64')
    .action(async (opts: {
      host: string; port?: string; adminHost: string; adminPort?: string; adminToken?: string; adminAllowedHosts?: string;
      demo: boolean; worker: boolean; tlsCert?: string; tlsKey?: string; controlPoll: string; workers?: string;
      failedAuthRps: string; failedAuthBurst: string; rateLimit: boolean;
      headersTimeout: string; requestTimeout: string; keepAliveTimeout: string; bodyBuffer: string;
      handshakeTimeout: string; maxPendingHandshakes: string; bodyIdleTimeout: string; minBodyRate: string;
    }) => {
      if (cluster.isWorker) {
        // A forked worker of `serve --workers N`: the primary passed the resolved configuration.
        // The serving code is loaded only by the processes that serve (not by every CLI command,
        // nor by the primary of serve --workers N, which only supervises).
        const { runWorker } = await import('../cluster/node-worker.js');
        const service = await runWorker(decodeWorkerConfig(io.env[WORKER_CONFIG_ENV]!)).catch((error: Error) => {
          // Tell the operator once (the primary reports the failed start), then leave: the IPC
          // channel to the primary would otherwise keep this process alive.
          io.stderr.write(`error: worker ${process.pid}: ${error.message}\n`);
          if (process.env.ECAPI_DEBUG_STACK) io.stderr.write(`${error.stack}\n`);
          process.exit(1);
        });
        serveDone = new Promise<void>((resolveDone) => {
          // After a clean close, leave the cluster: the IPC channel alone would keep the process alive.
          process.once('SIGTERM', () => void service.close().then(() => {
            if (process.connected) process.disconnect();
            resolveDone();
          }));
          process.once('SIGINT', () => {
            // The primary relays the shutdown; a terminal's Ctrl-C reaches the whole group.
          });
        });
        return;
      }
      const g = globals();
      const config: ServeConfig = {
        dataDir: g.dataDir,
        env: g.env,
        host: opts.host,
        port: opts.port !== undefined ? parsePort(opts.port) : DEFAULT_PORTS[g.env].port,
        adminHost: opts.adminHost,
        adminPort: opts.adminPort !== undefined ? parsePort(opts.adminPort) : DEFAULT_PORTS[g.env].adminPort,
        adminToken: opts.adminToken,
        adminAllowedHosts: (opts.adminAllowedHosts ?? '').split(',').map((h) => h.trim()).filter((h) => h !== ''),
        demo: opts.demo,
        tlsCert: opts.tlsCert,
        tlsKey: opts.tlsKey,
        controlPollMs: parseDurationMs(opts.controlPoll),
        workers: opts.workers !== undefined ? Math.floor(parsePositive(opts.workers)) : defaultServingProcesses(availableParallelism(), opts.worker),
        failedAuthPerSecond: parsePositive(opts.failedAuthRps),
        failedAuthBurst: parsePositive(opts.failedAuthBurst),
        rateLimit: opts.rateLimit,
        databaseUrl: g.databaseUrl,
        masterKeyFile: g.masterKeyFile,
        headersTimeoutMs: parseDurationMs(opts.headersTimeout),
        requestTimeoutMs: parseDurationMs(opts.requestTimeout),
        keepAliveTimeoutMs: parseDurationMs(opts.keepAliveTimeout),
        bodyBudgetBytes: Math.round(parsePositive(opts.bodyBuffer) * 1024 * 1024),
        handshakeTimeoutMs: parseDurationMs(opts.handshakeTimeout),
        maxPendingHandshakes: Math.floor(parsePositive(opts.maxPendingHandshakes)),
        bodyIdleTimeoutMs: parseDurationMs(opts.bodyIdleTimeout),
        minBodyBytesPerSecond: opts.minBodyRate === '0' ? 0 : Math.round(parsePositive(opts.minBodyRate) * 1024),
      };
      const service =
        config.workers > 1
          ? await (await import('../cluster/node-primary.js')).runPrimary(config)
          : await (await import('../service.js')).startService(config);
      if (service.demoKey) {
        io.stderr.write(
          demoBanner({ key: service.demoKey, host: config.host, port: service.port, certFile: service.certFile, env: g.env }) + '\n',
        );
      }
      // --- merged-view consumer (issue 5): its own child process, for both single and --workers N ---
      const consumer: ConsumerSupervisor | null = opts.worker
        ? startConsumerSupervisor({ dataDir: g.dataDir, env: g.env, databaseUrl: g.databaseUrl, logger: service.logger })
        : null;
      // --- end consumer ---
      serveDone = new Promise<void>((resolveDone) => {
        const stop = (signal: string) => {
          service.logger.info({ signal }, 'shutting down');
          // The consumer stops first (it finishes its batch); then the service flushes the queue.
          (consumer ? consumer.stop() : Promise.resolve()).then(() => service.close()).then(resolveDone, (error: Error) => {
            io.stderr.write(`error: shutdown failed: ${error.message}\n`);
            exitCode = 1;
            resolveDone();
          });
        };
        process.once('SIGTERM', () => stop('SIGTERM'));
        process.once('SIGINT', () => stop('SIGINT'));
      });
    });

  // data-set
  const dataSet = program.command('data-set').description('manage data sets (destination namespaces)');
  dataSet
    .command('create <id>')
    .description('create a data set')
    .action((id: string) =>
      withControl(async (cp, g) => {
        const record = await cp.createDataSet(id);
        out(g.json ? JSON.stringify(dataSetJson(record)) : `created data set ${record.id}`);
      }),
    );
  dataSet
    .command('list')
    .description('list data sets with their effective policy')
    .action(() =>
      withControl(async (cp, g) => {
        const records = (await cp.listDataSets()).map(dataSetJson);
        if (g.json) return void out(JSON.stringify(records));
        if (records.length === 0) return void out('no data sets');
        for (const r of records) {
          out(
            `${r.id}\tcreated ${r.created_at}\tconsent=${r.policy.consent} ip=${r.policy.ip} pii_scan=${r.policy.pii_scan} max_age=${r.policy.max_age} merge_window=${r.policy.merge_window} (policy v${r.policy.version})` +
              `\trps=${r.limits.rps} burst_rps=${r.limits.burst_rps} burst_seconds=${r.limits.burst_seconds} eps=${r.limits.eps}`,
          );
        }
      }),
    );
  dataSet
    .command('policy <id>')
    .description('set the privacy and validation policy of a data set')
    .addOption(new Option('--consent <mode>', 'GPP opt-outs: enforce (measurement-only), reject, off').argParser(oneOf('consent', ['enforce', 'reject', 'off'] as const)))
    .addOption(new Option('--ip <mode>', 'IP addresses: keep, truncate, drop').argParser(oneOf('ip', ['keep', 'truncate', 'drop'] as const)))
    .addOption(new Option('--pii-scan <mode>', 'plaintext emails in free text: redact, reject, off').argParser(oneOf('pii-scan', ['redact', 'reject', 'off'] as const)))
    .option('--max-age <duration>', 'oldest accepted event timestamp, like 90d')
    .option('--merge-window <duration>', 'record update window of the merged view, like 7d')
    .action((id: string, opts: { consent?: 'enforce' | 'reject' | 'off'; ip?: 'keep' | 'truncate' | 'drop'; piiScan?: 'redact' | 'reject' | 'off'; maxAge?: string; mergeWindow?: string }) =>
      withControl(async (cp, g) => {
        const patch: { -readonly [K in keyof PolicyPatch]: PolicyPatch[K] } = {};
        if (opts.consent) patch.consent = opts.consent;
        if (opts.ip) patch.ip = opts.ip;
        if (opts.piiScan) patch.piiScan = opts.piiScan;
        const window = { max: MAX_POLICY_WINDOW_SECONDS * 1000 };
        if (opts.maxAge) patch.maxAgeSeconds = parseWholeSeconds('--max-age', opts.maxAge, { ...window, what: 'the maximum event age' });
        // Milliseconds, exactly: `500ms` is a 500 ms window, never 0 (which would turn merging off).
        if (opts.mergeWindow) patch.mergeWindowMs = parseDurationMs(opts.mergeWindow, { ...window, what: 'the merge window' });
        const record = await cp.setPolicy(id, patch);
        const json = dataSetJson(record);
        out(g.json ? JSON.stringify(json) : `data set ${id}: policy v${json.policy.version} ${JSON.stringify(json.policy)}`);
      }),
    );

  dataSet
    .command('limits <id>')
    .description('override the rate limits of a data set (unset options keep their value)')
    .option('--rps <n>', 'sustained requests per second (default 1000)')
    .option('--burst-rps <n>', 'requests in any one second, at most (default 5000)')
    .option('--burst-seconds <n>', 'how long an idle data set may run at burst-rps (default 60)')
    .option('--eps <n>', 'sustained events per second across batches (default 100000)')
    .action((id: string, opts: { rps?: string; burstRps?: string; burstSeconds?: string; eps?: string }) =>
      withControl(async (cp, g) => {
        const patch: { rps?: number; burstRps?: number; burstSeconds?: number; eps?: number } = {};
        if (opts.rps) patch.rps = parsePositive(opts.rps);
        if (opts.burstRps) patch.burstRps = parsePositive(opts.burstRps);
        if (opts.burstSeconds) patch.burstSeconds = parsePositive(opts.burstSeconds);
        if (opts.eps) patch.eps = parsePositive(opts.eps);
        const json = dataSetJson(await cp.setLimits(id, patch));
        out(g.json ? JSON.stringify(json) : `data set ${id}: limits ${JSON.stringify(json.limits)}`);
      }),
    );

  // key
  const key = program.command('key').description('manage signing keys (principals)');
  key
    .command('create')
    .description('issue a key id and secret authorized for one or more data sets')
    .requiredOption('--data-set <id...>', 'data set(s) the key may write to (repeatable)')
    .action((opts: { dataSet: string[] }) =>
      withControl(async (cp, g) => {
        const issued = await cp.createKey(opts.dataSet);
        if (g.json) return void out(JSON.stringify({ key_id: issued.keyId, secret: issued.secret, data_sets: issued.dataSets }));
        out(`key id:    ${issued.keyId}\nsecret:    ${issued.secret}\ndata sets: ${issued.dataSets.join(', ')}\nThe secret is shown once. Store it in the sender's secret manager.`);
      }),
    );
  key
    .command('rotate <key_id>')
    .description('issue a new secret; the previous one verifies until the grace period ends')
    .option('--grace <duration>', 'how long the previous secret keeps verifying, like 30s, 10m, 1h (at most 365d)', '1h')
    .action((keyId: string, opts: { grace: string }) => {
      // Validated before the control plane is even opened: a refused grace writes nothing.
      const graceMs = parseDurationMs(opts.grace, { max: MAX_ROTATION_GRACE_MS, what: 'the grace period' });
      return withControl(async (cp, g) => {
        const rotated = await cp.rotateKey(keyId, graceMs);
        const json = { key_id: rotated.keyId, secret: rotated.secret, previous_secret_valid_until: iso(rotated.previousSecretValidUntil) };
        out(g.json ? JSON.stringify(json) : `key id:  ${json.key_id}\nsecret:  ${json.secret}\nprevious secret valid until ${json.previous_secret_valid_until}`);
      });
    });
  key
    .command('revoke <key_id>')
    .description('revoke a key; running servers refuse it within seconds')
    .action((keyId: string) =>
      withControl(async (cp, g) => {
        const record = await cp.revokeKey(keyId);
        out(g.json ? JSON.stringify(keyJson(record)) : `revoked key ${keyId}`);
      }),
    );
  key
    .command('list')
    .description('list keys (never prints secrets)')
    .action(() =>
      withControl(async (cp, g) => {
        const keys = (await cp.listKeys()).map(keyJson);
        if (g.json) return void out(JSON.stringify(keys));
        if (keys.length === 0) return void out('no keys');
        for (const k of keys) out(`${k.key_id}\t${k.status}\tdata sets: ${k.data_sets.join(', ') || '-'}\tcreated ${k.created_at}${k.rotated_at ? `\trotated ${k.rotated_at}` : ''}`);
      }),
    );

  // grant
  const grant = program.command('grant').description('authorize keys for data sets');
  grant
    .command('add <key_id> <data_set_id>')
    .description('authorize a key for a data set')
    .action((keyId: string, dataSetId: string) =>
      withControl(async (cp, g) => {
        await cp.addGrant(keyId, dataSetId);
        out(g.json ? JSON.stringify({ key_id: keyId, data_set_id: dataSetId, granted: true }) : `granted ${keyId} -> ${dataSetId}`);
      }),
    );
  grant
    .command('remove <key_id> <data_set_id>')
    .description('withdraw a key\'s authorization for a data set')
    .action((keyId: string, dataSetId: string) =>
      withControl(async (cp, g) => {
        await cp.removeGrant(keyId, dataSetId);
        out(g.json ? JSON.stringify({ key_id: keyId, data_set_id: dataSetId, granted: false }) : `removed ${keyId} -> ${dataSetId}`);
      }),
    );

  // queue
  const queue = program.command('queue').description('inspect the durable queue');
  queue
    .command('export')
    .description('print queued records as NDJSON, one per line')
    .option('--from <seq>', 'first sequence number', '1')
    .option('--data-set <id>', 'only records of this data set')
    .action((opts: { from: string; dataSet?: string }) =>
      withStorage(async (storage) => {
        const reader = storage.queueReader();
        let from = parseNonNegativeInt(opts.from);
        for (;;) {
          const records = await reader.read({ fromSeq: from, limit: 5000, ...(opts.dataSet ? { dataSetId: opts.dataSet } : {}) });
          if (records.length === 0) break;
          // Waits for the reader (bounded memory whatever the queue's size); stops if it went away.
          await writeWithBackpressure(io.stdout, records.map((r) => JSON.stringify(r)).join('\n') + '\n');
          from = records[records.length - 1]!.seq + 1;
        }
      }),
    );

  // migrate
  program
    .command('migrate')
    .description('apply pending schema migrations to the database of --database-url (idempotent; serve and worker also do it at start)')
    .action(async () => {
      const g = globals();
      const result = await migrateStorage({ dataDir: g.dataDir, env: g.env, databaseUrl: g.databaseUrl });
      if (!result) {
        out(g.json ? JSON.stringify({ profile: 'sqlite', applied: [] }) : 'embedded SQLite: nothing to migrate (schemas are created when the files are opened)');
        return;
      }
      if (g.json) return void out(JSON.stringify({ profile: 'postgres', schema: result.schema, applied: result.applied, current: result.current }));
      out(result.applied.length > 0
        ? `schema ${result.schema}: applied migration(s) ${result.applied.join(', ')}; now at version ${result.current}`
        : `schema ${result.schema}: up to date at version ${result.current}`);
    });

  // Command groups that live in their own modules register here.
  for (const register of commandModules) register(program, ctx);

  try {
    await program.parseAsync(argv as string[], { from: 'user' });
    if (serveDone) await serveDone;
    return exitCode;
  } catch (error) {
    if (error instanceof OutputClosedError) return 0; // `| head`: the reader has what it wanted
    if (error instanceof CommanderError) {
      return error.exitCode === 0 ? 0 : 2;
    }
    const message = error instanceof Error ? error.message : String(error);
    io.stderr.write(`error: ${message.split('\n')[0]}\n`);
    return error instanceof CliError ? error.exitCode : 1;
  }
}
