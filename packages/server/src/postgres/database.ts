/**
 * The PostgreSQL side of the storage: connection pools bound to an environment's schema, and the
 * versioned migrations (`ecapi-ingest migrate`, also run by every process at start).
 *
 * Environments: `production` and `test` live in two schemas of the same database
 * (`ecapi_production`, `ecapi_test`), as fully separate as their two data dirs are in the embedded
 * profile. Every connection of a pool has its search_path set to the environment's schema, so the
 * SQL elsewhere names tables without a schema.
 */
import pg from 'pg';
import type { Environment } from '../config.js';
import { withLibpqDefaults } from './connection-defaults.js';
import { MIGRATIONS } from './migrations.js';

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

// int8 (bigint) as a JS number: sequence numbers and epoch milliseconds stay far below 2^53.
pg.types.setTypeParser(20, (value) => Number(value));

export function schemaOf(env: Environment): string {
  return `ecapi_${env}`;
}

/** The URL without its password, for logs. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return 'postgres://(unparsable url)';
  }
}

export function createPool(
  url: string,
  env: Environment,
  options: { max?: number; applicationName?: string; settings?: Record<string, string> } = {},
): pg.Pool {
  const settings = { search_path: schemaOf(env), ...options.settings };
  const pool = new pg.Pool({
    // A URL without host or user means what it means to psql (connection-defaults.ts).
    connectionString: withLibpqDefaults(url, process.env),
    max: options.max ?? 4,
    application_name: options.applicationName ?? 'ecapi-ingest',
    options: Object.entries(settings).map(([k, v]) => `-c ${k}=${v}`).join(' '),
    idleTimeoutMillis: 30_000,
    connectionTimeoutMillis: 10_000,
    keepAlive: true,
  });
  // An idle client whose connection breaks emits 'error' on the pool; without a listener the
  // process would crash. The next query simply gets a new connection.
  pool.on('error', () => undefined);
  return pool;
}

/** Runs `work` in one transaction on one connection; commits when it resolves, rolls back when it throws. */
export async function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>, begin = 'BEGIN'): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query(begin);
    try {
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
  } finally {
    client.release();
  }
}

export interface MigrationResult {
  readonly schema: string;
  readonly applied: readonly number[];
  readonly current: number;
}

/**
 * Applies the migrations not yet applied to the environment's schema, in order, each in its own
 * transaction. Idempotent, and safe when several nodes start at once: a transaction-level advisory
 * lock serializes them, and each re-reads what is applied after taking it.
 */
export async function migrate(url: string, env: Environment): Promise<MigrationResult> {
  const schema = schemaOf(env);
  const client = new pg.Client({ connectionString: withLibpqDefaults(url, process.env), application_name: 'ecapi-ingest migrate' });
  await client.connect();
  try {
    const applied: number[] = [];
    await client.query('BEGIN');
    try {
      await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`ecapi-ingest/migrate/${schema}`]);
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
      await client.query(`SET LOCAL search_path = ${schema}`);
      await client.query(
        `CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
      );
      const done = new Set(
        (await client.query<{ version: number }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version),
      );
      for (const migration of MIGRATIONS) {
        if (done.has(migration.version)) continue;
        await client.query(migration.sql);
        await client.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [migration.version, migration.name]);
        applied.push(migration.version);
      }
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
    return { schema, applied, current: MIGRATIONS[MIGRATIONS.length - 1]!.version };
  } finally {
    await client.end();
  }
}

/** Current time in ms on the database's clock: the one clock every node agrees on. */
export const DB_NOW_MS = `(floor(extract(epoch from clock_timestamp()) * 1000))::bigint`;

/** The queue's acknowledgement is only as durable as the server's settings make a COMMIT: a warning when they do not, else null. */
export async function durabilityWarning(pool: pg.Pool): Promise<string | null> {
  const { rows } = await pool.query<{ fsync: string; sc: string }>(
    `SELECT current_setting('fsync') AS fsync, current_setting('synchronous_commit') AS sc`,
  );
  const { fsync, sc } = rows[0]!;
  if (fsync !== 'on') return 'PostgreSQL runs with fsync=off: a 200/207 does NOT mean the events survive a crash';
  if (sc === 'off') return 'PostgreSQL runs with synchronous_commit=off: a 200/207 may be answered before the events are flushed';
  return null;
}
