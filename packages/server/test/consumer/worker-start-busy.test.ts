/**
 * A worker that starts while another connection holds a lock on one of its SQLite files for longer
 * than the 5 s busy_timeout (after a SIGKILL: the WAL recovery of a large view WAL, the last
 * connection's checkpoint on close; any time: another writer of a view file) waits it out and
 * stays up, instead of exiting with "database is locked"; once the lock is gone it applies
 * everything, exactly as a run that never met the lock.
 *
 * The lock is real (another connection on the same file, in this process) and released only after
 * the worker has said it met it, which it can only say after its busy timeout ran out.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, readFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { queueDbFile, viewDbFile } from '../../src/config.js';
import { SqliteEventQueue } from '../../src/queue/sqlite-event-queue.js';
import { viewPartitionFile, viewShardFile } from '../../src/merged-view/sqlite-view-layout.js';
import { BUSY_RETRY_MESSAGE } from '../../src/consumer/sqlite-busy.js';
import { BIN, cliJson, consumerCaughtUp, tempDataDir } from '../helpers/server-process.js';
import { generateEvents } from '../helpers/event-generator.js';
import { assertSameTables, dumpView, viewLayoutOf } from '../helpers/view-dump.js';

/** The layout the workers make: they inherit the environment, so the file runs in the sharded layout with ECAPI_VIEW_LAYOUT=sharded. */
const LAYOUT = process.env.ECAPI_VIEW_LAYOUT === 'sharded' ? 'sharded' : 'data-sets';

const T0 = Date.UTC(2025, 4, 6, 19, 0);

async function appendEvents(dataDir: string, count: number, seed: number): Promise<void> {
  const queue = new SqliteEventQueue(queueDbFile(dataDir, 'production'));
  const generated = generateEvents(count, { seed, idSpace: 0.7, identifierSpace: 0.3 });
  for (let i = 0; i < generated.length; i += 200) {
    for (const ds of ['ds-a', 'ds-b']) {
      const part = generated.slice(i, i + 200).filter((g) => g.dataSetId === ds);
      if (part.length === 0) continue;
      await queue.append({
        requestId: `req-${seed}-${i}-${ds}`, keyId: 'key_test', dataSetId: ds, receivedAt: T0 + i * 1000, policyVersion: 1, mergeWindowMs: 7 * 86_400_000,
        events: part.map((g) => g.event), metas: part.map((g) => g.meta),
      });
    }
  }
  await queue.close();
}

async function newDataDir(prefix: string): Promise<string> {
  const dir = tempDataDir(prefix);
  for (const ds of ['ds-a', 'ds-b']) {
    await cliJson(dir, ['data-set', 'create', ds]);
    // The events arrived in 2025: out of the view retention's way.
    await cliJson(dir, ['data-set', 'policy', ds, '--view-retention', '3650d']);
  }
  return dir;
}

/** A `worker` process with its log (stdout) and stderr kept for assertions and failure messages. */
class WorkerProcess {
  readonly child: ChildProcess;
  log = '';
  stderr = '';
  readonly exited: Promise<void>;

  constructor(dataDir: string, partitions: number) {
    this.child = spawn(process.execPath, [BIN, '--data-dir', dataDir, 'worker', '--view-partitions', String(partitions)], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ECAPI_LOG_LEVEL: 'info' },
    });
    this.child.stdout!.setEncoding('utf8').on('data', (text: string) => (this.log += text));
    this.child.stderr!.setEncoding('utf8').on('data', (text: string) => (this.stderr += text));
    this.exited = new Promise((resolve) => this.child.once('exit', () => resolve()));
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  assertRunning(when: string): void {
    assert.ok(this.running, `the worker exited on its own (code ${this.child.exitCode}, signal ${this.child.signalCode}) ${when}:\n${this.stderr}\n${this.log}`);
  }

  /** Waits until its log has `text` (failing at once if it exits meanwhile). */
  async waitForLog(text: string, when: string, timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.log.includes(text)) {
      this.assertRunning(when);
      assert.ok(Date.now() < deadline, `no "${text}" in the worker's log within ${timeoutMs / 1000} s ${when}:\n${this.log}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async waitCaughtUp(dataDir: string, when: string): Promise<void> {
    await Promise.race([
      consumerCaughtUp(dataDir, 120_000),
      this.exited.then(() => this.assertRunning(when)),
    ]);
    this.assertRunning(when);
  }

  /** SIGTERM: it finishes its batch and exits 0. */
  async stop(): Promise<void> {
    this.assertRunning('before it was stopped');
    this.child.kill('SIGTERM');
    await this.exited;
    assert.equal(this.child.exitCode, 0, `worker stopped with SIGTERM exits 0:\n${this.stderr}`);
  }

  /** After a failed assertion: never leave it running (nor this file waiting for it). */
  async kill(): Promise<void> {
    if (!this.running) return;
    this.child.kill('SIGKILL');
    await this.exited;
  }
}

/** The same data dir consumed with nothing in the way: the view it must end with. */
async function referenceView(dataDir: string, partitions: number): Promise<Record<string, unknown[]>> {
  const copy = tempDataDir('ecapi-busy-ref-');
  cpSync(dataDir, copy, { recursive: true });
  const worker = new WorkerProcess(copy, partitions);
  try {
    await worker.waitCaughtUp(copy, 'in the reference run');
    await worker.waitForLog('"consumer started"', 'in the reference run');
    await worker.stop();
  } finally {
    await worker.kill();
  }
  return dumpView(viewDbFile(copy, 'production'));
}

/** Holds a lock on `file` from another connection until the returned function is called. */
function holdLock(file: string, kind: 'write' | 'exclusive'): () => void {
  const db = new Database(file, { fileMustExist: true });
  db.pragma('busy_timeout = 5000');
  // 'write': a long write transaction (another writer of the file). 'exclusive': nobody may even
  // read, as while a connection recovers a WAL after a crash or checkpoints it on close.
  if (kind === 'exclusive') db.pragma('locking_mode = EXCLUSIVE');
  db.exec(kind === 'exclusive' ? 'BEGIN EXCLUSIVE' : 'BEGIN IMMEDIATE');
  return () => {
    db.exec('ROLLBACK');
    db.close();
  };
}

async function startAgainstLock(dataDir: string, partitions: number, locked: string, kind: 'write' | 'exclusive', check?: () => void): Promise<void> {
  const expected = await referenceView(dataDir, partitions);
  let release: (() => void) | null = holdLock(locked, kind);
  const worker = new WorkerProcess(dataDir, partitions);
  try {
    // Said only once a connection's busy timeout (5 s) ran out against the lock.
    await worker.waitForLog(BUSY_RETRY_MESSAGE, 'while another connection held the lock');
    check?.();
    release();
    release = null;
    await worker.waitCaughtUp(dataDir, 'after the lock was released');
    await worker.waitForLog('"consumer started"', 'after the lock was released');
    await worker.stop();
  } finally {
    release?.();
    await worker.kill();
  }
  assert.deepEqual(viewLayoutOf(viewDbFile(dataDir, 'production')), { partitions, kind: LAYOUT }, 'the layout of the environment');
  // Read through the layout's files (a sharded view: its record shards and identity parts).
  const actual = dumpView(viewDbFile(dataDir, 'production'));
  assertSameTables(actual, expected, 'the view');
}

test('first start with view.db write-locked by another connection: the worker waits, stays up, applies everything', { timeout: 300_000 }, async () => {
  const dir = await newDataDir('ecapi-busy-view-');
  await appendEvents(dir, 3000, 21);
  const view = viewDbFile(dir, 'production');
  await startAgainstLock(dir, 2, view, 'write', () => {
    // While it waits to record the layout (view.db's write lock), partition 1's file already exists
    // in WAL mode: a reader that sees the layout never creates a partition file itself.
    const header = readFileSync(viewPartitionFile(view, 1)).subarray(18, 20);
    assert.deepEqual([...header], [2, 2], 'view-p1.db is a WAL database before the layout names it');
    // The sharded layout's record shards likewise.
    for (let k = 0; LAYOUT === 'sharded' && k < 2; k++) {
      assert.deepEqual([...readFileSync(viewShardFile(view, k)).subarray(18, 20)], [2, 2], `view-s${k}.db is a WAL database before the layout names it`);
    }
  });
});

test('start with queue.db exclusively locked (as by a WAL recovery): the worker waits, stays up, applies everything', { timeout: 300_000 }, async () => {
  const dir = await newDataDir('ecapi-busy-queue-');
  await appendEvents(dir, 3000, 22);
  await startAgainstLock(dir, 2, queueDbFile(dir, 'production'), 'exclusive');
});

test('restart with a partition file exclusively locked: the worker waits, stays up, applies everything', { timeout: 300_000 }, async () => {
  const dir = await newDataDir('ecapi-busy-part-');
  await appendEvents(dir, 2000, 23);
  const first = new WorkerProcess(dir, 2);
  try {
    await first.waitCaughtUp(dir, 'in the first run');
    await first.stop();
  } finally {
    await first.kill();
  }
  await appendEvents(dir, 2000, 24);
  await startAgainstLock(dir, 2, viewPartitionFile(viewDbFile(dir, 'production'), 1), 'exclusive');
});
