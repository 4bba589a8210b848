/**
 * PostgreSQL for tests. Suites of the scale-out profile run when ECAPI_TEST_DATABASE_URL points at
 * a server whose user may create databases (`.ci/run` starts a throwaway cluster with
 * scripts/pg-test-cluster.sh and exports it); without it they are skipped, visibly.
 * Each caller gets a database of its own, so test files never see each other's data.
 */
import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { main } from '../../src/cli/main.js';
import { createPool, migrate, type Pool } from '../../src/postgres/database.js';

export const TEST_DATABASE_URL = process.env.ECAPI_TEST_DATABASE_URL || undefined;

/** For `test(name, pgOnly, fn)`: skips with a visible reason when there is no test database. */
export const pgOnly: { skip: string | false } = {
  skip: TEST_DATABASE_URL ? false : 'ECAPI_TEST_DATABASE_URL is not set: PostgreSQL suite skipped (scripts/pg-test-cluster.sh start)',
};

/** A new, empty database on the test server; returns its URL. */
export async function freshDatabase(prefix = 't'): Promise<string> {
  if (!TEST_DATABASE_URL) throw new Error('ECAPI_TEST_DATABASE_URL is not set');
  const name = `ecapi_${prefix.replace(/[^a-z0-9_]/gi, '_').toLowerCase()}_${randomBytes(5).toString('hex')}`;
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

/** A fresh database (freshDatabase), migrated for the `production` environment, and a pool on it. */
export async function migratedPool(prefix: string): Promise<Pool> {
  const url = await freshDatabase(prefix);
  await migrate(url, 'production');
  return createPool(url, 'production');
}

/** Runs one query against a database URL (test inspection), on a short-lived connection. */
export async function queryDatabase<T extends pg.QueryResultRow = any>(url: string, text: string, params: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: url, options: '-c search_path=ecapi_production' });
  await client.connect();
  try {
    return (await client.query<T>(text, params)).rows;
  } finally {
    await client.end();
  }
}

/** Runs the CLI in-process against the database at `url` (`--json`); its parsed output, or null. Throws on a non-zero exit. */
export async function pgCli(dataDir: string, url: string, args: string[]): Promise<any> {
  let stdout = '';
  let stderr = '';
  const code = await main(['--data-dir', dataDir, '--database-url', url, '--json', ...args], {
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t) },
    env: process.env,
  });
  if (code !== 0) throw new Error(`ecapi-ingest ${args.join(' ')} failed (${code}): ${stderr}`);
  return stdout.trim() ? JSON.parse(stdout) : null;
}
