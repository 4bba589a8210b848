/**
 * Whether a PostgreSQL error means "the database cannot be reached now" (an outage, a restart, a
 * failover, a database closed to connections), which a process should wait out, as opposed to a
 * fault of its configuration or its schema (a wrong password, a database or schema that does not
 * exist, a migration not run), which it should report and exit on.
 *
 * Used where a process would otherwise exit on a transient outage: the consumer's start
 * (view-worker.ts), which `serve` would then restart after a backoff of up to 30 s, saying so once
 * per restart. What counts:
 * - the socket's own errors (refused, reset, timed out, unreachable, a DNS answer not there yet);
 * - on a Unix socket (a database URL naming a socket directory), no socket file: PostgreSQL removes
 *   it on a clean stop and makes it again when it starts (a crash leaves it, and that connect is
 *   refused). The directory itself may come and go with the server too (a systemd unit's
 *   RuntimeDirectory, a proxy sidecar that makes its socket directory once it runs), so a missing
 *   directory is waited out as well, as a TCP port where nothing listens is: a wrong one waits
 *   forever, and the warning said every minute names the path;
 * - node-postgres's own ("Connection terminated…", the pool's connect time-out);
 * - SQLSTATE class 08 (connection exception), 57P (operator intervention: admin or crash shutdown,
 *   the server starting up), 53 (insufficient resources: too many connections), and 55000 with
 *   PostgreSQL's "is not currently accepting connections" (ALTER DATABASE … ALLOW_CONNECTIONS false).
 * Anything else is not: 28P01 (authentication), 3D000 (no such database), 42P01 (no such table: not
 * migrated) and the rest exit as they did, with their message.
 */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN', 'EPIPE', 'EAI_AGAIN']);

export function isDatabaseUnreachable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (NETWORK_CODES.has(code)) return true;
    if (code === 'ENOENT') return noSocketFile(error);
    if (/^(08|57P|53)/.test(code)) return true;
    if (code === '55000') return /is not currently accepting connections/.test(error.message);
    return false;
  }
  // node-postgres's own, without a code: a connection that ended under a query, or the connect time-out.
  return /^Connection terminated|timeout exceeded when trying to connect/.test(error.message);
}

/** A connect to a Unix socket found no socket file (not another ENOENT: a file the process itself looked for). */
function noSocketFile(error: Error): boolean {
  const { syscall, address } = error as { syscall?: unknown; address?: unknown };
  return syscall === 'connect' && typeof address === 'string' && address.startsWith('/');
}
