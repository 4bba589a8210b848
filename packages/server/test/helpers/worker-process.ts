/**
 * A real `ecapi-ingest worker` process of an embedded data dir, for the tests that SIGKILL it and
 * restart it (test/consumer/sigkill-restart.test.ts, test/lifecycle/sharded-deletion-sigkill.test.ts).
 * The view's layout is always given explicitly (ECAPI_VIEW_LAYOUT in its environment), so a test
 * does not change with the environment it runs in. `spawnWorker` and `reap` also serve the
 * PostgreSQL workers (test/consumer/postgres-sharded-workers.test.ts).
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import type { ViewLayoutKind } from '../../src/merged-view/sqlite-view-layout.js';
import { StatsReader } from '../../src/analytics/stats-reader.js';
import { openStorage } from '../../src/storage/open-storage.js';
import { BIN } from './server-process.js';

/** A worker process; `exited` resolves when it is gone, `log` is what it printed so far. */
export interface WorkerProcess {
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
  readonly log: () => string;
}

export interface WorkerOptions {
  readonly partitions: number;
  readonly layout: ViewLayoutKind;
  readonly logLevel: 'warn' | 'info';
  /** More `worker` options (e.g. ['--retention', '0']). */
  readonly args?: readonly string[];
}

export function startWorker(dataDir: string, options: WorkerOptions): WorkerProcess {
  return spawnWorker(['--data-dir', dataDir, 'worker', '--view-partitions', String(options.partitions), ...(options.args ?? [])], {
    ECAPI_LOG_LEVEL: options.logLevel,
    ECAPI_VIEW_LAYOUT: options.layout,
  });
}

/** `ecapi-ingest <args>` as a child process, `env` over this process's environment, its output collected. */
export function spawnWorker(args: readonly string[], env: NodeJS.ProcessEnv): WorkerProcess {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  let log = '';
  for (const stream of [child.stdout!, child.stderr!]) stream.setEncoding('utf8').on('data', (text: string) => (log += text));
  // Listened for from the start: a worker that exits on its own is noticed, never awaited after the fact.
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return { child, exited, log: () => log };
}

/** Kills (SIGKILL) the workers still running and waits until every one is gone: a test's `finally`. */
export async function reap(workers: readonly WorkerProcess[]): Promise<void> {
  for (const worker of workers) if (worker.child.exitCode === null && worker.child.signalCode === null) worker.child.kill('SIGKILL');
  await Promise.all(workers.map((worker) => worker.exited));
}

/** Fails at once, with what it printed, when a worker the test did not stop has exited. */
export function assertRunning(worker: WorkerProcess, what: string): void {
  const { exitCode, signalCode } = worker.child;
  assert.ok(exitCode === null && signalCode === null, `${what}: the worker exited on its own (code ${exitCode}, signal ${signalCode}):\n${worker.log()}`);
}

/** The log lines (JSON) of a worker whose `msg` is `msg`. */
export function logLines(worker: WorkerProcess, msg: string): Record<string, unknown>[] {
  return worker
    .log()
    .split('\n')
    .filter((line) => line.includes(`"msg":"${msg}"`))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** The consumer's lag as `worker status` computes it (the lowest offset of the view's parts). */
export async function lagOf(dataDir: string) {
  const storage = await openStorage({ dataDir, env: 'production', migrate: false });
  const reader = new StatsReader(storage);
  try {
    return await reader.lag();
  } finally {
    await reader.close();
    await storage.close();
  }
}

/**
 * Starts a worker (log level info) and waits until it has logged "consumer started" and `done()`
 * holds (by default: the lag is 0), then stops it with SIGTERM (exit code 0). Returns its
 * "consumer started" line (the partitions and the layout it runs).
 */
export async function runWorkerUntil(
  dataDir: string,
  options: Omit<WorkerOptions, 'logLevel'> & { what: string; timeoutMs?: number; done?: (worker: WorkerProcess) => Promise<boolean> },
): Promise<{ started: Record<string, unknown>; worker: WorkerProcess }> {
  // Its log on stdout: the SIGTERM below must wait for "consumer started" (the handler is installed
  // by then). The lag can already be 0 when it starts (the kills may leave nothing to do), and a
  // SIGTERM before the handler exists kills the process (exit code null), as it should.
  const worker = startWorker(dataDir, { ...options, logLevel: 'info' });
  const done = options.done ?? (async () => (await lagOf(dataDir)).lag_records === 0);
  const timeoutMs = options.timeoutMs ?? 60_000;
  const deadline = Date.now() + timeoutMs;
  try {
    while (logLines(worker, 'consumer started').length === 0 || !(await done(worker))) {
      assertRunning(worker, options.what);
      assert.ok(Date.now() < deadline, `${options.what}: not done within ${timeoutMs / 1000} s:\n${worker.log()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } catch (error) {
    worker.child.kill('SIGKILL'); // a failed wait must not leave the worker (and the test file) running
    await worker.exited;
    throw error;
  }
  assertRunning(worker, `${options.what} (done)`);
  worker.child.kill('SIGTERM');
  await worker.exited;
  assert.equal(worker.child.exitCode, 0, `${options.what}: SIGTERM, exit code 0:\n${worker.log()}`);
  return { started: logLines(worker, 'consumer started')[0]!, worker };
}
