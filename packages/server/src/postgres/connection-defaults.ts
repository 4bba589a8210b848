/**
 * What a PostgreSQL URL means to psql, for node-postgres too: libpq's defaults that the driver
 * lacks, and its one unreadable connection error said plainly.
 *
 * - `postgres:///ecapi` (no host) is a Unix socket to libpq, and peer authentication as the OS user:
 *   the guide's local setup (docs/guides/scale-out-postgresql.md) and what psql does with the same
 *   URL. node-postgres reads an empty host as `localhost` over TCP, where that role has no password.
 *   So with no host in the URL (no `host=` parameter, no PGHOST), the socket directory is the first
 *   of libpq's usual ones that holds the server's socket for the port (Debian's /var/run/postgresql,
 *   then /tmp); none found: the driver's default as before. With no user (none in the URL, no
 *   PGUSER) the OS user is taken, as libpq does (node-postgres reads only $USER, unset under some
 *   supervisors).
 * - A server that asks for a password the URL does not give fails inside the driver with
 *   "SASL: SCRAM-SERVER-FIRST-MESSAGE: client password must be a string": said instead as what to do.
 */
import { existsSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';

/** libpq's socket directories, in the order this looks: Debian's and Ubuntu's, then the compiled-in default elsewhere. */
export const SOCKET_DIRS = ['/var/run/postgresql', '/tmp'] as const;

/**
 * `url` with the host and user libpq would take and node-postgres would not, as `host=` and `user=`
 * parameters (the driver reads the URL over any other option, so they go in it); `url` itself when
 * it or the environment gives them. `socketExists` is existsSync (tests give their own).
 */
export function withLibpqDefaults(url: string, env: NodeJS.ProcessEnv, socketExists: (path: string) => boolean = existsSync): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return url;
  }
  if (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:') return url;
  let changed = false;
  if (parsed.hostname === '' && !parsed.searchParams.has('host') && !env.PGHOST) {
    const port = parsed.port || parsed.searchParams.get('port') || env.PGPORT || '5432';
    const dir = SOCKET_DIRS.find((d) => socketExists(join(d, `.s.PGSQL.${port}`)));
    if (dir !== undefined) {
      parsed.searchParams.set('host', dir);
      changed = true;
    }
  }
  if (parsed.username === '' && !parsed.searchParams.has('user') && !env.PGUSER && !env.USER) {
    parsed.searchParams.set('user', userInfo().username);
    changed = true;
  }
  return changed ? parsed.toString() : url;
}

/** A connection error said as what to do, or null when it is not one this knows. */
export function connectionErrorAdvice(error: unknown): string | null {
  const message = error instanceof Error ? error.message : '';
  if (message.includes('client password must be a string')) {
    return 'PostgreSQL asks for a password and the database URL gives none: put it in the URL (postgres://user:password@host/db) or set PGPASSWORD';
  }
  return null;
}
