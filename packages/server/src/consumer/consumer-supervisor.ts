/**
 * Runs the consumer (`ecapi-ingest worker`) as a child process of `serve`, for both the single
 * process and the `--workers N` primary: one place that spawns it, restarts it when it dies (with a
 * backoff that resets once it has run for a minute), and stops it with SIGTERM on shutdown.
 *
 * A separate process, not a thread of a serving process: the consumer's CPU and SQLite work never
 * blocks the event loops that answer requests, and a crash of either side leaves the other
 * running. It inherits this process's environment, ECAPI_WORKER_NICE included: the consumer lowers
 * its own threads' CPU priority (consumer-priority.ts), so that on a busy machine the serving
 * processes get the cores first.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Environment } from '../config.js';
import type { Logger } from '../observability/logger.js';

/** The CLI entry point, relative to this compiled module (dist/src/consumer -> dist/src/bin). */
export const CLI_BIN = fileURLToPath(new URL('../bin/ecapi-ingest.js', import.meta.url));

export interface ConsumerSupervisor {
  /** Pid of the running consumer, or null between restarts. */
  pid(): number | null;
  /** SIGTERM to the consumer, then wait for it to exit (SIGKILL after `graceMs`). */
  stop(graceMs?: number): Promise<void>;
}

export function startConsumerSupervisor(options: {
  readonly dataDir: string;
  readonly env: Environment;
  /** Passed to the consumer in its environment (ECAPI_DATABASE_URL), never on its command line. */
  readonly databaseUrl?: string | undefined;
  readonly logger: Logger;
  readonly bin?: string;
}): ConsumerSupervisor {
  const bin = options.bin ?? CLI_BIN;
  let child: ChildProcess | null = null;
  let stopping = false;
  let failures = 0;
  let restartTimer: NodeJS.Timeout | null = null;

  const start = () => {
    restartTimer = null;
    if (stopping) return;
    const startedAt = Date.now();
    // The consumer's main thread, a small young generation: V8's default semi-space on a large
    // machine is 64 MB, and 32 made the consumer the node's largest process. With the default P > 1
    // it only hands out steps and runs the partitions' checkpoints (their threads set their own,
    // sqlite-partitions.ts); with --view-partitions 1 it applies the batches, and 8 MB against 32
    // still showed no CPU cost per event there, for ~70 MB less peak RSS (issue 17, bench/README.md
    // "Memory per process").
    const proc = spawn(process.execPath, ['--max-semi-space-size=8', bin, '--data-dir', options.dataDir, '--env', options.env, 'worker'], {
      // The IPC channel is the child's lifeline: if this process dies, even by SIGKILL, the channel
      // closes and the consumer stops (see the `worker` command) instead of living on as an orphan.
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      env: options.databaseUrl ? { ...process.env, ECAPI_DATABASE_URL: options.databaseUrl } : process.env,
    });
    child = proc;
    proc.once('error', (error) => options.logger.error({ err: { message: error.message } }, 'consumer could not be started'));
    proc.once('exit', (code, signal) => {
      if (child === proc) child = null;
      if (stopping) return;
      failures = Date.now() - startedAt > 60_000 ? 1 : failures + 1;
      const delay = Math.min(30_000, 500 * 2 ** (failures - 1));
      options.logger.error({ code, signal, restart_in_ms: delay }, 'consumer exited; restarting');
      restartTimer = setTimeout(start, delay);
      restartTimer.unref();
    });
  };
  start();

  return {
    pid: () => child?.pid ?? null,
    async stop(graceMs = 15_000) {
      stopping = true;
      if (restartTimer) clearTimeout(restartTimer);
      const proc = child;
      if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => proc.kill('SIGKILL'), graceMs);
        proc.once('exit', () => {
          clearTimeout(timer);
          resolve();
        });
        proc.kill('SIGTERM');
      });
    },
  };
}
