/**
 * Runs the real `ecapi-ingest serve` binary as a child process on ephemeral ports and reads the
 * ports it bound from its "listening" log line. Black-box tests talk to it over real TLS.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { once } from 'node:events';
import { main } from '../../src/cli/main.js';
import { freshDatabase } from './postgres.js';
import { waitFor } from './fault-tools.js';

/**
 * Storage profile of the black-box suites: `ECAPI_TEST_PROFILE=postgres` (with
 * ECAPI_TEST_DATABASE_URL) runs the same tests against the PostgreSQL profile: every data dir gets
 * a fresh database, which startServer, cli and provision pass on (`.ci/run` runs them both ways).
 */
export const TEST_PROFILE: 'sqlite' | 'postgres' = process.env.ECAPI_TEST_PROFILE === 'postgres' ? 'postgres' : 'sqlite';
const databases = new Map<string, Promise<string>>();

/** The database URL of a data dir under the postgres profile (created on first use), else undefined. */
export async function databaseUrlFor(dataDir: string): Promise<string | undefined> {
  if (TEST_PROFILE !== 'postgres') return undefined;
  let url = databases.get(dataDir);
  if (!url) databases.set(dataDir, (url = freshDatabase('bb')));
  return url;
}

export const BIN = fileURLToPath(new URL('../../src/bin/ecapi-ingest.js', import.meta.url));

export function tempDataDir(prefix = 'ecapi-test-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export interface ServerProcess {
  readonly child: ChildProcess;
  readonly port: number;
  readonly adminPort: number;
  readonly ca: string;
  readonly dataDir: string;
  readonly env: string;
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export async function startServer(options: {
  dataDir: string;
  env?: 'production' | 'test';
  args?: string[];
  demo?: boolean;
  extraEnv?: Record<string, string>;
  /** Options for the node binary itself, e.g. ['--cpu-prof'] when profiling. */
  nodeArgs?: string[];
}): Promise<ServerProcess> {
  const env = options.env ?? 'production';
  const args = [
    ...(options.nodeArgs ?? []),
    BIN, '--data-dir', options.dataDir, '--env', env, 'serve',
    '--port', '0', '--admin-port', '0', '--control-poll', '200ms',
    ...(options.demo ? [] : ['--no-demo']),
    ...(options.args ?? []),
  ];
  const databaseUrl = await databaseUrlFor(options.dataDir);
  const child = spawn(process.execPath, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ECAPI_LOG_LEVEL: 'info', ...(databaseUrl ? { ECAPI_DATABASE_URL: databaseUrl } : {}), ...options.extraEnv },
  });
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (text: string) => (output += text));
  child.stderr!.setEncoding('utf8').on('data', (text: string) => (output += text));
  const ports = await new Promise<{ port: number; adminPort: number }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${output}`)), 20_000);
    const onData = () => {
      for (const line of output.split('\n')) {
        if (!line.includes('"ecapi-ingest listening"')) continue;
        const parsed = JSON.parse(line) as { port: number; admin_port: number };
        clearTimeout(timer);
        child.stdout!.off('data', onData);
        resolve({ port: parsed.port, adminPort: parsed.admin_port });
        return;
      }
    };
    child.stdout!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening:\n${output}`));
    });
  });
  const ca = readFileSync(join(options.dataDir, 'tls', 'localhost-cert.pem'), 'utf8');
  return {
    child,
    ...ports,
    ca,
    dataDir: options.dataDir,
    env,
    output: () => output,
    stop: (signal: NodeJS.Signals = 'SIGTERM') => stopChild(child, signal),
  };
}

export interface CliResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs a CLI command in-process against a data dir and environment. */
export async function cli(dataDir: string, args: string[], env: 'production' | 'test' = 'production'): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  const databaseUrl = await databaseUrlFor(dataDir);
  const code = await main(['--data-dir', dataDir, '--env', env, ...(databaseUrl ? ['--database-url', databaseUrl] : []), ...args], {
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t) },
    env: process.env,
  });
  return { code, stdout, stderr };
}

/** Runs a CLI command with --json and parses its one JSON document; fails loudly otherwise. */
export async function cliJson<T = any>(dataDir: string, args: string[], env: 'production' | 'test' = 'production'): Promise<T> {
  const result = await cli(dataDir, ['--json', ...args], env);
  if (result.code !== 0) throw new Error(`ecapi-ingest ${args.join(' ')} failed (${result.code}): ${result.stderr}`);
  return JSON.parse(result.stdout) as T;
}

/** Sends `signal` to a child not yet gone and resolves with its exit code (null when a signal ended it). */
export async function stopChild(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  child.kill(signal);
  const [code] = (await once(child, 'exit')) as [number | null];
  return code;
}

/** Waits until the merged-view consumer has applied everything queued (and something was queued); its `worker status`. */
export function consumerCaughtUp(dataDir: string, timeoutMs = 10_000): Promise<any> {
  return waitFor('the consumer to catch up', async () => {
    const s = await cliJson(dataDir, ['worker', 'status']);
    return s.lag_records === 0 && s.queue_last_seq > 0 ? s : undefined;
  }, timeoutMs);
}

/** Creates a data set and a key for it; returns the credentials. */
export async function provision(dataDir: string, dataSets: string[], env: 'production' | 'test' = 'production') {
  const existing = (await cliJson<{ id: string }[]>(dataDir, ['data-set', 'list'], env)).map((d) => d.id);
  for (const id of dataSets) if (!existing.includes(id)) await cliJson(dataDir, ['data-set', 'create', id], env);
  const args = ['key', 'create'];
  for (const id of dataSets) args.push('--data-set', id);
  const key = await cliJson<{ key_id: string; secret: string; data_sets: string[] }>(dataDir, args, env);
  return { keyId: key.key_id, secret: key.secret, dataSets: key.data_sets };
}

export async function exportQueue(dataDir: string, env: 'production' | 'test' = 'production', extra: string[] = []) {
  const result = await cli(dataDir, ['queue', 'export', ...extra], env);
  if (result.code !== 0) throw new Error(result.stderr);
  return result.stdout
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as { seq: number; data_set_id: string; key_id: string; request_id: string; received_at: number; event: Record<string, any>; meta?: any });
}

/** CLI arguments that select a data dir's test-profile database (none in the embedded profile). */
export async function profileArgs(dataDir: string): Promise<string[]> {
  const url = await databaseUrlFor(dataDir);
  return url ? ['--database-url', url] : [];
}

/** Environment for a spawned `ecapi-ingest` process of a data dir: the test profile's database URL. */
export async function profileEnv(dataDir: string): Promise<Record<string, string>> {
  const url = await databaseUrlFor(dataDir);
  return url ? { ECAPI_DATABASE_URL: url } : {};
}

/**
 * A real, external fault of the queue's store: another session holds the lock that every queue
 * commit needs (SQLite: an exclusive transaction on queue.db; PostgreSQL: the queue_head row),
 * longer than the queue waits for it. Returns the function that releases it.
 */
export async function blockQueueCommits(dataDir: string, env: 'production' | 'test' = 'production'): Promise<() => Promise<void>> {
  const url = await databaseUrlFor(dataDir);
  if (url) {
    const pg = (await import('pg')).default;
    const client = new pg.Client({ connectionString: url, options: `-c search_path=ecapi_${env}` });
    await client.connect();
    await client.query('BEGIN');
    await client.query('SELECT next_seq FROM queue_head WHERE id = 1 FOR UPDATE');
    return async () => {
      await client.query('ROLLBACK');
      await client.end();
    };
  }
  const Database = (await import('better-sqlite3')).default;
  const blocker = new Database(join(dataDir, env, 'queue.db'));
  blocker.pragma('busy_timeout = 1000');
  blocker.exec('BEGIN EXCLUSIVE');
  return async () => {
    blocker.exec('ROLLBACK');
    blocker.close();
  };
}
