/** Where a CLI run writes. Tests pass buffers; the bin shim passes the process streams. */
export interface CliIo {
  readonly stdout: { write(text: string): unknown };
  readonly stderr: { write(text: string): unknown };
  readonly env: NodeJS.ProcessEnv;
}

export const processIo: CliIo = { stdout: process.stdout, stderr: process.stderr, env: process.env };

/** A failure the operator can act on: printed as one line on stderr, exit code 1. */
export class CliError extends Error {
  override readonly name = 'CliError';
}
