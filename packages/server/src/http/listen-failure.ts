/**
 * The one line `serve` exits with when a port cannot be bound (issue 29): which address, which
 * port (public or admin) and why, in words, instead of a bare `listen EADDRINUSE` after which the
 * process lived on serving nothing. The caller closes whatever it had opened before it throws.
 */
export type PortRole = 'public port' | 'admin port';

const REASONS: Record<string, string> = {
  EADDRINUSE: 'address already in use (another process listens there: stop it or choose another port)',
  EACCES: 'permission denied (ports below 1024 need privileges: choose a port above 1023)',
  EADDRNOTAVAIL: 'address not available (no interface of this machine has it)',
  ENOTFOUND: 'host name not found',
  EAI_AGAIN: 'host name could not be resolved',
};

export class ListenError extends Error {
  override readonly name = 'ListenError';
  readonly code: string | undefined;
  constructor(message: string, code: string | undefined) {
    super(message);
    this.code = code;
  }
}

/** `cannot listen on 127.0.0.1:8443 (public port): address already in use (…)`. */
export function listenFailure(error: unknown, host: string, port: number, role: PortRole): ListenError {
  if (error instanceof ListenError) return error;
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const reason = (code && REASONS[code]) ?? (error instanceof Error ? error.message : String(error));
  const address = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
  return new ListenError(`cannot listen on ${address} (${role}): ${reason}`, code);
}
