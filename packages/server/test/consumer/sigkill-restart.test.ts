/**
 * A consumer killed with SIGKILL at random points and restarted ends in exactly the state of an
 * uninterrupted run over the same queue: merged records, identities, counters and offsets, with
 * the view in 1, 2 or 4 partitions (threads) on either side.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync } from 'node:fs';
import { join } from 'node:path';
import { SqliteEventQueue } from '../../src/queue/sqlite-event-queue.js';
import { queueDbFile, viewDbFile } from '../../src/config.js';
import { StatsReader } from '../../src/analytics/stats-reader.js';
import { openStorage } from '../../src/storage/open-storage.js';
import { BIN, cliJson, tempDataDir } from '../helpers/server-process.js';
import { generateEvents, prng } from '../helpers/event-generator.js';
import { dumpView } from '../helpers/view-dump.js';

const T0 = Date.UTC(2025, 4, 6, 19, 0);
const EVENTS = 30_000;

async function fillQueue(dataDir: string): Promise<number> {
  const queue = new SqliteEventQueue(queueDbFile(dataDir, 'production'));
  const generated = generateEvents(EVENTS, { seed: 11, idSpace: 0.7, identifierSpace: 0.3 });
  const appends: Promise<unknown>[] = [];
  for (let i = 0; i < generated.length; i += 400) {
    for (const ds of ['ds-a', 'ds-b']) {
      const part = generated.slice(i, i + 400).filter((g) => g.dataSetId === ds);
      if (part.length === 0) continue;
      appends.push(queue.append({
        requestId: `req-${i}-${ds}`, keyId: 'key_test', dataSetId: ds,
        // Three hours of arrivals, so hour buckets and ds-b's 1h merge window both matter.
        receivedAt: T0 + Math.floor((i / EVENTS) * 3 * 3_600_000),
        policyVersion: 1,
        events: part.map((g) => g.event),
        metas: part.map((g) => g.meta),
      }));
    }
  }
  await Promise.all(appends);
  await queue.close();
  return EVENTS;
}

/** A worker process; `exited` resolves when it is gone, `stderr` keeps what it printed there. */
interface Worker {
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
  readonly log: () => string;
}

function startWorker(dataDir: string, partitions: number, logLevel: 'warn' | 'info'): Worker {
  const child = spawn(process.execPath, [BIN, '--data-dir', dataDir, 'worker', '--view-partitions', String(partitions)], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ECAPI_LOG_LEVEL: logLevel },
  });
  let log = '';
  for (const stream of [child.stdout!, child.stderr!]) stream.setEncoding('utf8').on('data', (text: string) => (log += text));
  // Listened for from the start: a worker that exits on its own is noticed, never awaited after the fact.
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return { child, exited, log: () => log };
}

/** Fails at once, with what it printed, when a worker this test did not stop has exited. */
function assertRunning(worker: Worker, what: string): void {
  const { exitCode, signalCode } = worker.child;
  assert.ok(exitCode === null && signalCode === null, `${what}: the worker exited on its own (code ${exitCode}, signal ${signalCode}):\n${worker.log()}`);
}

async function lagOf(dataDir: string) {
  const storage = await openStorage({ dataDir, env: 'production', migrate: false });
  const reader = new StatsReader(storage);
  try {
    return await reader.lag();
  } finally {
    await reader.close();
    await storage.close();
  }
}

async function runUntilCaughtUp(dataDir: string, partitions: number): Promise<void> {
  // Its log on stdout: the SIGTERM below must wait for "consumer started" (the handler is installed
  // by then). The lag can already be 0 when it starts (the kills below may leave nothing to do),
  // and a SIGTERM before the handler exists kills the process (exit code null), as it should.
  const worker = startWorker(dataDir, partitions, 'info');
  const deadline = Date.now() + 60_000;
  try {
    while (!worker.log().includes('"consumer started"') || (await lagOf(dataDir)).lag_records > 0) {
      assertRunning(worker, `P=${partitions}, the last run (until caught up)`);
      assert.ok(Date.now() < deadline, `consumer did not start and catch up within 60 s:\n${worker.log()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  } catch (error) {
    worker.child.kill('SIGKILL'); // a failed wait must not leave the worker (and this file) running
    throw error;
  }
  assertRunning(worker, `P=${partitions}, the last run (caught up)`);
  worker.child.kill('SIGTERM');
  await worker.exited;
  assert.equal(worker.child.exitCode, 0, `SIGTERM: exit code 0:\n${worker.log()}`);
}

test('SIGKILL at random points, restart: the same view as an uninterrupted run, with 1, 2 and 4 partitions', { timeout: 300_000 }, async () => {
  const reference = tempDataDir('ecapi-sigkill-ref-');
  await cliJson(reference, ['data-set', 'create', 'ds-a']);
  await cliJson(reference, ['data-set', 'create', 'ds-b']);
  await cliJson(reference, ['data-set', 'policy', 'ds-b', '--merge-window', '1h']);
  // The events arrived in 2025: out of the view retention's way (the default, 180 days, would expire
  // them while the workers run, at moments that differ between runs).
  for (const ds of ['ds-a', 'ds-b']) await cliJson(reference, ['data-set', 'policy', ds, '--view-retention', '3650d']);
  await fillQueue(reference);
  const copies = [1, 2, 4].map((partitions) => {
    const dir = tempDataDir(`ecapi-sigkill-run${partitions}-`);
    cpSync(reference, dir, { recursive: true });
    return { dir, partitions };
  });

  await runUntilCaughtUp(reference, 1);
  const expected = dumpView(viewDbFile(reference, 'production'));
  assert.deepEqual(expected.consumer_offsets, [{ partition: 0, consumer: 'merged-view', next_seq: EVENTS + 1 }]);
  assert.ok((expected.view_counters as { name: string }[]).some((c) => c.name === 'discarded'), 'the merge window discarded something');
  assert.ok((expected.identity_nodes as { parent: string | null }[]).some((n) => n.parent !== null), 'some identities were joined');

  for (const { dir: killed, partitions } of copies) {
    // Kill while the consumer is making progress: once its offset has moved, after a random delay.
    const rand = prng(Date.now() & 0xffff);
    let kills = 0;
    for (let i = 0; i < 6; i++) {
      const before = (await lagOf(killed)).next_seq;
      const worker = startWorker(killed, partitions, 'warn');
      const deadline = Date.now() + 30_000;
      try {
        while ((await lagOf(killed)).next_seq === before && Date.now() < deadline) {
          assertRunning(worker, `P=${partitions}, run ${i + 1} (before its kill)`);
          await new Promise((r) => setTimeout(r, 10));
        }
        await new Promise((r) => setTimeout(r, Math.floor(rand() * 150)));
        assertRunning(worker, `P=${partitions}, run ${i + 1} (at its kill)`);
      } finally {
        worker.child.kill('SIGKILL');
        await worker.exited;
      }
      const lag = await lagOf(killed);
      if (lag.lag_records === 0) break;
      kills++;
    }
    await runUntilCaughtUp(killed, partitions);
    assert.ok(kills >= 1, `P=${partitions}: expected at least one kill before the consumer caught up, got ${kills}`);

    const actual = dumpView(viewDbFile(killed, 'production'));
    assert.deepEqual(
      actual.consumer_offsets,
      Array.from({ length: partitions }, (_, partition) => ({ partition, consumer: 'merged-view', next_seq: EVENTS + 1 })),
      `P=${partitions}: every partition's offset is past the queue`,
    );
    for (const table of Object.keys(expected)) {
      if (table === 'consumer_offsets') continue;
      assert.equal(actual[table]!.length, expected[table]!.length, `P=${partitions}: ${table} row count`);
      assert.deepEqual(actual[table], expected[table], `P=${partitions}: ${table}`);
    }
  }
});
