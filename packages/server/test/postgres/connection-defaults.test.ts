/**
 * libpq's meaning of a URL without host or user, for node-postgres too (postgres/connection-defaults.ts):
 * `postgres:///ecapi` goes to the server's Unix socket where libpq would look for it, the OS user
 * when none is given; a URL that names them, or an environment that does, is left alone. And the
 * driver's unreadable error for a missing password is said as what to do. The URL the driver gets
 * is read back by a node-postgres client, as the driver reads it (that the driver then
 * connects through a socket directory given as `host` is its own documented behaviour).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { userInfo } from 'node:os';
import pg from 'pg';
import { connectionErrorAdvice, withLibpqDefaults } from '../../src/postgres/connection-defaults.js';

/** What node-postgres makes of a URL: the host, user and database a client would connect with (nothing is connected). */
const parse = (url: string) => {
  const client = new pg.Client({ connectionString: url });
  return { host: client.host, user: client.user, database: client.database };
};
const socketAt = (...paths: string[]) => (p: string) => paths.includes(p);

test('no host: the first libpq socket directory that holds the port\'s socket; none: unchanged', () => {
  const debian = withLibpqDefaults('postgres:///ecapi', { USER: 'ana' }, socketAt('/var/run/postgresql/.s.PGSQL.5432'));
  assert.deepEqual([parse(debian).host, parse(debian).database], ['/var/run/postgresql', 'ecapi']);
  assert.ok(!debian.includes('user='), 'no user added: $USER is there');
  const tmp = withLibpqDefaults('postgres:///ecapi?port=55433', { USER: 'ana' }, socketAt('/tmp/.s.PGSQL.55433', '/var/run/postgresql/.s.PGSQL.5432'));
  assert.equal(parse(tmp).host, '/tmp', 'the port given as a parameter picks the socket');
  assert.equal(parse(withLibpqDefaults('postgres:///ecapi', { USER: 'ana', PGPORT: '6000' }, socketAt('/tmp/.s.PGSQL.6000'))).host, '/tmp');
  assert.equal(withLibpqDefaults('postgres:///ecapi', { USER: 'ana' }, socketAt()), 'postgres:///ecapi', 'no socket found: the driver\'s default, as before');
});

test('a URL or environment that names the host or user is left alone', () => {
  const any = socketAt('/var/run/postgresql/.s.PGSQL.5432');
  for (const url of ['postgres://ecapi:pw@db.internal:5432/ecapi', 'postgres://ecapi@127.0.0.1:55433/postgres', 'postgres:///ecapi?host=/srv/pg&user=x', 'not a url']) {
    assert.equal(withLibpqDefaults(url, { USER: 'ana' }, any), url);
  }
  assert.equal(withLibpqDefaults('postgres:///ecapi', { USER: 'ana', PGHOST: 'db' }, any), 'postgres:///ecapi');
});

test('no user anywhere: the OS user, as libpq takes it', () => {
  const url = withLibpqDefaults('postgres:///ecapi', {}, socketAt('/var/run/postgresql/.s.PGSQL.5432'));
  assert.ok(url.includes(`user=${encodeURIComponent(userInfo().username)}`), url);
  assert.ok(withLibpqDefaults('postgres://db.internal/ecapi', {}, socketAt()).includes(`user=${encodeURIComponent(userInfo().username)}`));
  assert.equal(withLibpqDefaults('postgres://db.internal/ecapi', { PGUSER: 'svc' }, socketAt()), 'postgres://db.internal/ecapi');
});

test('a missing password is said as what to do; other errors are not rewritten', () => {
  assert.match(connectionErrorAdvice(new Error('SASL: SCRAM-SERVER-FIRST-MESSAGE: client password must be a string'))!, /asks for a password and the database URL gives none: .*PGPASSWORD/);
  assert.equal(connectionErrorAdvice(new Error('connect ECONNREFUSED 127.0.0.1:5432')), null);
  assert.equal(connectionErrorAdvice('text'), null);
});
