/**
 * The consumer runs at a lower CPU priority than the serving processes (consumer/consumer-priority.ts):
 * every thread of a real `ecapi-ingest worker` process, the partition threads created after the
 * priority was lowered included, runs at nice 10 by default, at the nice it was started with under
 * `--nice 0`, and at ECAPI_WORKER_NICE's value; `serve`'s consumer child gets the default while the
 * serving process itself keeps its own. A nice out of 0-19 is refused with a message.
 *
 * On Linux nice is per thread, so each thread's own value is read from /proc/<pid>/task/<tid>/stat.
 * The threads are read once the worker's heartbeat shows (written after the partition threads were
 * started) and its thread list has stopped changing.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { BIN, cli, cliJson, profileEnv, startServer, stopChild, tempDataDir, TEST_PROFILE } from '../helpers/server-process.js';
import { waitFor } from '../helpers/fault-tools.js';

const linuxOnly = { skip: process.platform !== 'linux' ? 'nice is read per thread from /proc (Linux only)' : false, timeout: 120_000 } as const;

interface ThreadNice {
  readonly tid: number;
  readonly name: string;
  readonly nice: number;
}

/** Every thread of `pid` with its nice: field 19 of /proc/<pid>/task/<tid>/stat (fields counted after the comm's last ')'). */
function threadNices(pid: number | 'self'): ThreadNice[] {
  const threads: ThreadNice[] = [];
  for (const entry of readdirSync(`/proc/${pid}/task`)) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/task/${entry}/stat`, 'utf8');
    } catch {
      continue; // the thread ended between the listing and the read
    }
    const close = stat.lastIndexOf(')');
    const name = stat.slice(stat.indexOf('(') + 1, close);
    // After ") " comes field 3 (state); field 19 (nice) is the 17th from there.
    const fields = stat.slice(close + 2).trim().split(' ');
    threads.push({ tid: Number(entry), name, nice: Number(fields[16]) });
  }
  return threads;
}

/** The nice this test process runs at: what a child that leaves its priority alone has. */
const ownNice = () => threadNices('self').find((t) => t.tid === process.pid)!.nice;

const describe = (threads: readonly ThreadNice[]) => threads.map((t) => `${t.tid} ${t.name}: ${t.nice}`).join('\n');

/**
 * The worker's threads once it has started: its heartbeat (the consumer loop writes it after it
 * started the partitions' threads) names `pid`, and then its thread list stays the same for 1 s.
 */
async function settledThreads(dataDir: string, pid: number, alive: () => void): Promise<ThreadNice[]> {
  await waitFor('the worker\'s heartbeat', async () => {
    alive();
    const status = await cliJson(dataDir, ['worker', 'status']);
    return status.running === true && status.pid === pid;
  }, 60_000);
  let last = '';
  let sameFor = 0;
  return waitFor('the worker\'s thread list to stop changing', () => {
    alive();
    const threads = threadNices(pid);
    const tids = threads.map((t) => t.tid).sort((a, b) => a - b).join(',');
    sameFor = tids === last ? sameFor + 1 : 0;
    last = tids;
    return sameFor >= 10 ? threads : undefined;
  }, 30_000);
}

/** A real `ecapi-ingest worker` on a data dir, with its output kept for assertions. */
class WorkerProcess {
  readonly child: ChildProcess;
  output = '';

  constructor(dataDir: string, args: string[], env: Record<string, string>) {
    this.child = spawn(process.execPath, [BIN, '--data-dir', dataDir, 'worker', ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ECAPI_LOG_LEVEL: 'info', ...env },
    });
    this.child.stdout!.setEncoding('utf8').on('data', (text: string) => (this.output += text));
    this.child.stderr!.setEncoding('utf8').on('data', (text: string) => (this.output += text));
  }

  alive = (): void => {
    assert.ok(this.child.exitCode === null && this.child.signalCode === null, `the worker exited (code ${this.child.exitCode}):\n${this.output}`);
  };

  /** The number of threads the worker lowered itself, from its log line (absent: it lowered none). */
  lowered(): number | undefined {
    for (const line of this.output.split('\n')) {
      if (!line.includes('"consumer CPU priority lowered"')) continue;
      return (JSON.parse(line) as { threads: number }).threads;
    }
    return undefined;
  }
}

async function runWorker(args: string[], env: Record<string, string> = {}): Promise<{ threads: ThreadNice[]; lowered: number | undefined; output: string }> {
  const dataDir = tempDataDir('ecapi-nice-');
  await cliJson(dataDir, ['data-set', 'create', 'shop']);
  const worker = new WorkerProcess(dataDir, args, { ...(await profileEnv(dataDir)), ...env });
  try {
    const threads = await settledThreads(dataDir, worker.child.pid!, worker.alive);
    return { threads, lowered: worker.lowered(), output: worker.output };
  } finally {
    const code = await stopChild(worker.child);
    assert.equal(code, 0, `the worker stops with SIGTERM and exits 0:\n${worker.output}`);
  }
}

function assertAllAt(threads: readonly ThreadNice[], nice: number, what: string): void {
  assert.ok(threads.length > 1, `${what}: only ${threads.length} thread(s) found`);
  assert.deepEqual(threads.filter((t) => t.nice !== nice), [], `${what}: every thread at nice ${nice}:\n${describe(threads)}`);
}

test('worker: every thread at nice 10 by default, the partition threads started afterwards included', linuxOnly, async () => {
  const { threads, lowered, output } = await runWorker([]);
  assertAllAt(threads, 10, 'worker with the defaults');
  assert.ok(lowered !== undefined, `the worker logs that it lowered its priority:\n${output}`);
  if (TEST_PROFILE === 'sqlite') {
    // The two partition threads (default P = 2) did not exist when the priority was lowered: they
    // inherited it from the thread that created them.
    assert.ok(threads.length >= lowered + 2, `${threads.length} threads now, ${lowered} lowered at the start: the partition threads came later`);
  }
});

test('worker --nice 0: the priority is left alone', linuxOnly, async () => {
  const { threads, lowered } = await runWorker(['--nice', '0']);
  assertAllAt(threads, ownNice(), 'worker --nice 0');
  assert.equal(lowered, undefined, 'nothing lowered, nothing logged');
});

test('worker with ECAPI_WORKER_NICE=5: every thread at nice 5', linuxOnly, async () => {
  const { threads } = await runWorker([], { ECAPI_WORKER_NICE: '5' });
  assertAllAt(threads, 5, 'worker with ECAPI_WORKER_NICE=5');
});

test('serve: its consumer child runs every thread at nice 10, the serving process keeps its own', linuxOnly, async () => {
  const dataDir = tempDataDir('ecapi-nice-serve-');
  const server = await startServer({ dataDir });
  try {
    const status = await waitFor('serve\'s consumer to run', async () => {
      const s = await cliJson(dataDir, ['worker', 'status']);
      return s.running === true ? s : undefined;
    }, 60_000);
    const serverAlive = () => assert.equal(server.child.exitCode, null, `serve exited:\n${server.output()}`);
    const threads = await settledThreads(dataDir, status.pid as number, serverAlive);
    assertAllAt(threads, 10, 'serve\'s consumer');
    assertAllAt(threadNices(server.child.pid!), ownNice(), 'the serving process');
  } finally {
    assert.equal(await server.stop(), 0, server.output());
  }
});

test('worker --nice out of 0-19 or not a number: refused with a message', async () => {
  const dataDir = tempDataDir('ecapi-nice-bad-');
  for (const value of ['25', '-1', '1.5', 'low']) {
    const result = await cli(dataDir, ['worker', '--nice', value]);
    assert.equal(result.code, 1, `--nice ${value}: ${result.stderr}`);
    assert.equal(result.stderr, `error: invalid nice value "${value}" (--nice or ECAPI_WORKER_NICE: 0 to 19; 0 leaves the consumer's CPU priority alone)\n`);
  }
});
