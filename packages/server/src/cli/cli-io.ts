/** Where a CLI run writes. Tests pass buffers; the bin shim passes the process streams. */
export interface CliIo {
  readonly stdout: { write(text: string): unknown };
  readonly stderr: { write(text: string): unknown };
  readonly env: NodeJS.ProcessEnv;
}

export const processIo: CliIo = { stdout: process.stdout, stderr: process.stderr, env: process.env };

/** A failure the operator can act on: printed as one line on stderr, exit code 1. */
export class CliError extends Error {
  override readonly name: string = 'CliError';
  readonly exitCode: number = 1;
}

/** A command line that cannot work as given (a missing or invalid option or argument): exit code 2, like commander's own. */
export class UsageError extends CliError {
  override readonly name = 'UsageError';
  override readonly exitCode = 2;
}

/**
 * The reader of stdout went away (`| head`): the command stops quietly and exits 0, as `cat` does.
 */
export class OutputClosedError extends Error {
  override readonly name = 'OutputClosedError';
}

type EventfulStdout = CliIo['stdout'] & {
  on?(event: string, listener: (...args: any[]) => void): unknown;
  once?(event: string, listener: (...args: any[]) => void): unknown;
  off?(event: string, listener: (...args: any[]) => void): unknown;
  destroyed?: boolean;
};

const closedOutputs = new WeakSet<object>();
const watchedOutputs = new WeakSet<object>();

function isClosedPipe(error: NodeJS.ErrnoException): boolean {
  return error.code === 'EPIPE' || error.code === 'ERR_STREAM_DESTROYED' || error.code === 'ECONNRESET';
}

/**
 * Watches a stream stdout for a reader that closed early: EPIPE then marks it closed instead of
 * crashing the process with an unhandled 'error' event and a stack trace. Other errors are rethrown.
 */
export function watchOutput(stdout: CliIo['stdout']): void {
  const stream = stdout as EventfulStdout;
  if (typeof stream.on !== 'function' || watchedOutputs.has(stream)) return;
  watchedOutputs.add(stream);
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (!isClosedPipe(error)) throw error;
    closedOutputs.add(stream);
  });
}

/**
 * Writes `text` and, when the stream's buffer is full, waits until it drains, so that a command
 * printing millions of records holds at most one page in memory whatever the reader's speed.
 * Throws OutputClosedError once the reader has gone.
 */
export async function writeWithBackpressure(stdout: CliIo['stdout'], text: string): Promise<void> {
  const stream = stdout as EventfulStdout;
  if (isClosed(stream)) throw new OutputClosedError('stdout was closed by its reader');
  const ok = stream.write(text);
  if (ok === false && typeof stream.once === 'function' && typeof stream.off === 'function') {
    watchOutput(stream);
    await new Promise<void>((resolve) => {
      const done = () => {
        stream.off!('drain', done);
        stream.off!('close', done);
        stream.off!('error', done);
        resolve();
      };
      stream.once!('drain', done);
      stream.once!('close', done);
      stream.once!('error', done);
    });
  }
  if (isClosed(stream)) throw new OutputClosedError('stdout was closed by its reader');
}

function isClosed(stream: EventfulStdout): boolean {
  return closedOutputs.has(stream) || stream.destroyed === true;
}
