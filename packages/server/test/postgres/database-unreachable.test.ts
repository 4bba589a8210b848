/**
 * postgres/database-unreachable.ts: which errors the consumer's start waits out (an outage) and
 * which it exits on (its configuration or schema). The errors are real ones where a real server
 * can give them: a closed port, a database closed to connections, a database that does not exist,
 * a table that does not exist.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { isDatabaseUnreachable } from '../../src/postgres/database-unreachable.js';
import { freshDatabase, pgOnly, TEST_DATABASE_URL } from '../helpers/postgres.js';

async function errorOf(connectionString: string, text = 'SELECT 1'): Promise<Error> {
  const client = new pg.Client({ connectionString, connectionTimeoutMillis: 5000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query(text);
  } catch (error) {
    return error as Error;
  } finally {
    await client.end().catch(() => undefined);
  }
  throw new Error(`no error from ${text}`);
}

test('a refused connection is an outage', async () => {
  // A port that was free a moment ago: nothing listens there.
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  const error = await errorOf(`postgres://u@127.0.0.1:${port}/db`);
  assert.equal((error as { code?: string }).code, 'ECONNREFUSED');
  assert.equal(isDatabaseUnreachable(error), true);
});

test('a Unix socket with no socket file is an outage, whether or not its directory exists now; another ENOENT is not', async () => {
  // The directory a server's socket lives in, with no server running (PostgreSQL removes its socket
  // file on a clean stop), and one not made yet (a systemd RuntimeDirectory, a proxy sidecar not started).
  const dir = mkdtempSync(join(tmpdir(), 'ecapi-pgsock-'));
  try {
    for (const socketDir of [dir, join(dir, 'not-made-yet')]) {
      const error = await errorOf(`postgres://u@${encodeURIComponent(socketDir)}:5432/db`);
      assert.equal((error as { code?: string }).code, 'ENOENT', error.message);
      assert.equal(isDatabaseUnreachable(error), true, socketDir);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  // An ENOENT that is not a connect (a file the process itself looked for) is not an outage.
  assert.equal(isDatabaseUnreachable(Object.assign(new Error('ENOENT: no such file'), { code: 'ENOENT', syscall: 'open', path: '/tmp' })), false);
});

test('SQLSTATE classes: connection exceptions, shutdowns and too many connections wait; the rest exit', () => {
  const withCode = (code: string, message = 'x') => Object.assign(new Error(message), { code });
  for (const code of ['08006', '08001', '57P01', '57P03', '53300']) assert.equal(isDatabaseUnreachable(withCode(code)), true, code);
  for (const code of ['28P01', '3D000', '42P01', '42501', '23505', '55000', '40001']) assert.equal(isDatabaseUnreachable(withCode(code)), false, code);
  assert.equal(isDatabaseUnreachable(new Error('Connection terminated unexpectedly')), true);
  assert.equal(isDatabaseUnreachable(new Error('timeout exceeded when trying to connect')), true);
  assert.equal(isDatabaseUnreachable(new Error('relation "queue_head" does not exist')), false);
  assert.equal(isDatabaseUnreachable('ECONNREFUSED'), false);
});

test('from a real server: closed to connections waits; no such database, no such table exit', pgOnly, async () => {
  const url = await freshDatabase('unreach');
  const db = new URL(url).pathname.slice(1);
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  try {
    await admin.query(`ALTER DATABASE ${db} ALLOW_CONNECTIONS false`);
    const closed = await errorOf(url);
    assert.equal((closed as { code?: string }).code, '55000', closed.message);
    assert.equal(isDatabaseUnreachable(closed), true);

    const missing = new URL(url);
    missing.pathname = `/${db}_missing`;
    const noDatabase = await errorOf(missing.toString());
    assert.equal((noDatabase as { code?: string }).code, '3D000');
    assert.equal(isDatabaseUnreachable(noDatabase), false);

    const noTable = await errorOf(TEST_DATABASE_URL!, 'SELECT * FROM no_such_table_here');
    assert.equal((noTable as { code?: string }).code, '42P01');
    assert.equal(isDatabaseUnreachable(noTable), false);
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${db} WITH (FORCE)`).catch(() => undefined);
    await admin.end();
  }
});
