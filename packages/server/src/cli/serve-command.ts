/**
 * `serve`: the ingestion service. One process, or with `--workers N` a primary (cluster/node-primary.ts)
 * and N serving processes; a forked serving process runs this same command and is recognised by
 * node:cluster. Options are parsed here into a ServeConfig; the node itself is composed in
 * serving-node.ts. The merged-view consumer runs as a child process unless `--no-worker`.
 *
 * The serving code is imported only by the processes that serve, never by other commands.
 */
import { Option, type Command } from 'commander';
import cluster from 'node:cluster';
import { availableParallelism } from 'node:os';
import { DEFAULT_PORTS, type ServeConfig } from '../config.js';
import { parseDurationMs } from '../control/duration.js';
import { consoleUrl, demoBanner } from '../demo.js';
import { decodeWorkerConfig, WORKER_CONFIG_ENV, type WorkerMessage } from '../cluster/cluster-messages.js';
import { defaultServingProcesses } from '../cluster/default-serving-processes.js';
import { DEFAULT_FAILED_AUTH_LIMITS } from '../rate-limit/failed-auth-shedder.js';
import { startConsumerSupervisor, type ConsumerSupervisor } from '../consumer/consumer-supervisor.js';
import type { CliContext } from './cli-context.js';
import { parsePort, parsePositive } from './cli-parsers.js';
import { connectionErrorAdvice } from '../postgres/connection-defaults.js';
import { npmLauncherOf, watchNpmParent } from './npm-parent-watch.js';
import { parseTrustedProxies } from '../http/trusted-proxies.js';

/** --proxy-protocol's list, checked now (a bad entry stops `serve` with one line), kept as text. */
function parseProxyProtocolOption(text: string): string[] {
  parseTrustedProxies(text);
  return text.split(',').map((entry) => entry.trim()).filter((entry) => entry !== '');
}

export function registerServeCommand(program: Command, ctx: CliContext): void {
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
    .addOption(new Option('--tls-cert <file>', 'PEM certificate chain (default: generated self-signed for localhost)').env('ECAPI_TLS_CERT'))
    .addOption(new Option('--tls-key <file>', 'PEM private key').env('ECAPI_TLS_KEY'))
    .option('--control-poll <duration>', 'how often to pick up control-plane changes', '1s')
    .addOption(new Option('--workers <n>', 'serving processes (default: one per CPU core, less one for the consumer unless --no-worker; at least 1). On PostgreSQL each opens up to 12 database connections (docs/guides/scale-out-postgresql.md)').env('ECAPI_WORKERS'))
    .option('--failed-auth-rps <n>', 'failed authentications per second one client address may sustain', String(DEFAULT_FAILED_AUTH_LIMITS.perSecond))
    .option('--no-rate-limit', 'do not enforce data-set rate limits (when a gateway in front enforces quotas)')
    .option('--failed-auth-burst <n>', 'failed authentications one client address may burst before it gets 429', String(DEFAULT_FAILED_AUTH_LIMITS.burst))
    .option('--headers-timeout <duration>', 'a request\'s headers must arrive within this', '10s')
    .option('--request-timeout <duration>', 'a whole request (headers and body) must arrive within this', '30s')
    .option('--keep-alive-timeout <duration>', 'idle connections are closed after this', '65s')
    .option('--body-buffer <MiB>', 'request-body bytes one serving process holds at once; later bodies wait unread', '16')
    .option('--handshake-timeout <duration>', 'a TLS handshake must complete within this', '10s')
    .option('--max-pending-handshakes <n>', 'connections mid-handshake per serving process; past it the oldest is dropped', '1024')
    .option('--max-connections <n>', 'established connections per serving process; past it the oldest on which no request authenticated is dropped', '10000')
    .option('--body-idle-timeout <duration>', 'a request whose body sends nothing for this long is dropped', '10s')
    .addOption(new Option('--proxy-protocol <CIDRs>', 'comma-separated addresses or CIDRs of L4 balancers that send a PROXY protocol v1/v2 header: from them the header gives the client address (failed-auth shedding); a header from any other peer closes the connection').env('ECAPI_PROXY_PROTOCOL'))
    .option('--min-body-rate <KiB/s>', 'bodies on connections not yet authenticated must average this after --body-idle-timeout (0: off)', '64')
    .action(async (opts: {
      host: string; port?: string; adminHost: string; adminPort?: string; adminToken?: string; adminAllowedHosts?: string;
      demo: boolean; worker: boolean; tlsCert?: string; tlsKey?: string; controlPoll: string; workers?: string;
      failedAuthRps: string; failedAuthBurst: string; rateLimit: boolean;
      headersTimeout: string; requestTimeout: string; keepAliveTimeout: string; bodyBuffer: string;
      handshakeTimeout: string; maxPendingHandshakes: string; maxConnections: string; bodyIdleTimeout: string; minBodyRate: string;
      proxyProtocol?: string;
    }) => {
      if (cluster.isWorker) {
        // A forked worker of `serve --workers N`: the primary passed the resolved configuration.
        // The serving code is loaded only by the processes that serve (not by every CLI command,
        // nor by the primary of serve --workers N, which only supervises).
        const { runWorker } = await import('../cluster/node-worker.js');
        const service = await runWorker(decodeWorkerConfig(ctx.io.env[WORKER_CONFIG_ENV]!)).catch((error: Error) => {
          // The primary reports the failed start, with this line, as the one line `serve` exits
          // with; then leave: the IPC channel to the primary would otherwise keep this process alive.
          if (process.env.ECAPI_DEBUG_STACK) ctx.io.stderr.write(`${error.stack}\n`);
          const message = connectionErrorAdvice(error) ?? error.message;
          const failed: WorkerMessage = { type: 'ecapi:start-failed', message };
          if (process.connected) process.send!(failed, () => process.exit(1));
          else {
            ctx.io.stderr.write(`error: worker ${process.pid}: ${message}\n`);
            process.exit(1);
          }
          return new Promise<never>(() => undefined);
        });
        ctx.keepAlive(new Promise<void>((resolveDone) => {
          // After a clean close, leave the cluster: the IPC channel alone would keep the process alive.
          process.once('SIGTERM', () => void service.close().then(() => {
            if (process.connected) process.disconnect();
            resolveDone();
          }));
          process.once('SIGINT', () => {
            // The primary relays the shutdown; a terminal's Ctrl-C reaches the whole group.
          });
        }));
        return;
      }
      const g = ctx.globals();
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
        maxConnections: Math.floor(parsePositive(opts.maxConnections)),
        bodyIdleTimeoutMs: parseDurationMs(opts.bodyIdleTimeout),
        minBodyBytesPerSecond: opts.minBodyRate === '0' ? 0 : Math.round(parsePositive(opts.minBodyRate) * 1024),
        proxyProtocolFrom: opts.proxyProtocol === undefined ? undefined : parseProxyProtocolOption(opts.proxyProtocol),
      };
      // The signal handlers come first: a SIGTERM that arrives before `process.once` is called kills
      // the process by the signal (Node installs no OS handler until then), and a supervisor or test
      // that stops serve during its start (or as soon as it printed its URL) must get a clean stop.
      // A stop asked for while the service starts is carried out once it is up.
      type StopReason = { signal: string } | { reason: string };
      const stopping: { asked: StopReason | null; stop: ((why: StopReason) => void) | null } = { asked: null, stop: null };
      const askStop = (why: StopReason) => (stopping.stop ? stopping.stop(why) : (stopping.asked ??= why));
      process.once('SIGTERM', () => askStop({ signal: 'SIGTERM' }));
      process.once('SIGINT', () => askStop({ signal: 'SIGINT' }));
      const service =
        config.workers > 1
          ? await (await import('../cluster/node-primary.js')).runPrimary(config)
          : await (await import('../service.js')).startService(config);
      if (service.demoKey) {
        ctx.io.stderr.write(
          demoBanner({ key: service.demoKey, host: config.host, port: service.port, certFile: service.certFile, env: g.env }) + '\n',
        );
      }
      let consumer: ConsumerSupervisor | null = null;
      ctx.keepAlive(new Promise<void>((resolveDone) => {
        let stopped = false;
        let stopWatch: (() => void) | null = null;
        stopping.stop = (why) => {
          if (stopped) return;
          stopped = true;
          stopWatch?.();
          service.logger.info(why, 'shutting down');
          // The consumer stops first (it finishes its batch); then the service flushes the queue.
          (consumer ? consumer.stop() : Promise.resolve()).then(() => service.close()).then(resolveDone, (error: Error) => {
            ctx.io.stderr.write(`error: shutdown failed: ${error.message}\n`);
            ctx.setExitCode(1);
            resolveDone();
          });
        };
        // Under `npm start` or npx, a SIGTERM to npm kills the shell between them, not serve (npm-parent-watch.ts).
        stopWatch = watchNpmParent({ env: ctx.io.env, onGone: () => stopping.stop?.({ reason: `the ${npmLauncherOf(ctx.io.env)} that ran it has exited` }) });
      }));
      if (stopping.asked) {
        stopping.stop?.(stopping.asked);
        return;
      }
      // --- merged-view consumer (issue 5): its own child process, for both single and --workers N ---
      consumer = opts.worker
        ? startConsumerSupervisor({ dataDir: g.dataDir, env: g.env, databaseUrl: g.databaseUrl, logger: service.logger })
        : null;
      // --- end consumer ---
      // Where to look next: the operator console on the admin port (stderr, like the demo banner).
      ctx.io.stderr.write(`Operator console: ${consoleUrl(config.adminHost, service.adminPort)}\n`);
    });
}
