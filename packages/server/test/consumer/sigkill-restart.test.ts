/**
 * A consumer killed with SIGKILL at random points and restarted ends in exactly the state of an
 * uninterrupted run over the same queue: merged records, identities, counters and offsets, with
 * the view in 1, 2 or 4 partitions (threads) on either side; and the same for the sharded layout
 * (consumer/identity-stage-applier.ts: P record shards and P identity parts, each with its own
 * offset, so a kill leaves them at different queue positions), compared with the same
 * uninterrupted run of the data-set layout. The layout of every worker is given explicitly
 * (ECAPI_VIEW_LAYOUT in its environment), so the file tests the same whatever the environment says.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, existsSync } from 'node:fs';
import { SqliteEventQueue } from '../../src/queue/sqlite-event-queue.js';
import { queueDbFile, viewDbFile } from '../../src/config.js';
import { viewShardFile, type ViewLayoutKind } from '../../src/merged-view/sqlite-view-layout.js';
import { cliJson, tempDataDir } from '../helpers/server-process.js';
import { generateEvents, prng } from '../helpers/event-generator.js';
import { assertSameTables, dumpView, viewFences, viewLayoutOf } from '../helpers/view-dump.js';
import { assertRunning, lagOf, runWorkerUntil, startWorker } from '../helpers/worker-process.js';

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
        mergeWindowMs: ds === 'ds-b' ? 3_600_000 : 7 * 86_400_000, // the policies set below
        events: part.map((g) => g.event),
        metas: part.map((g) => g.meta),
      }));
    }
  }
  await Promise.all(appends);
  await queue.close();
  return EVENTS;
}

/** Runs a worker until the consumer has caught up, then stops it; its "consumer started" line. */
async function runUntilCaughtUp(dataDir: string, partitions: number, layout: ViewLayoutKind): Promise<Record<string, unknown>> {
  const { started } = await runWorkerUntil(dataDir, { partitions, layout, what: `${layout} P=${partitions}, the last run (until caught up)` });
  return started;
}

/**
 * A queue filled once (not consumed yet), and the view an uninterrupted run of one data-set
 * partition gives over it: the reference of every test below.
 */
let reference: Promise<{ template: string; expected: Record<string, unknown[]> }> | undefined;
function referenceRun() {
  reference ??= (async () => {
    const template = tempDataDir('ecapi-sigkill-template-');
    await cliJson(template, ['data-set', 'create', 'ds-a']);
    await cliJson(template, ['data-set', 'create', 'ds-b']);
    await cliJson(template, ['data-set', 'policy', 'ds-b', '--merge-window', '1h']);
    // The events arrived in 2025: out of the view retention's way (the default, 180 days, would expire
    // them while the workers run, at moments that differ between runs).
    for (const ds of ['ds-a', 'ds-b']) await cliJson(template, ['data-set', 'policy', ds, '--view-retention', '3650d']);
    await fillQueue(template);
    const dir = tempDataDir('ecapi-sigkill-ref-');
    cpSync(template, dir, { recursive: true });
    await runUntilCaughtUp(dir, 1, 'data-sets');
    const expected = dumpView(viewDbFile(dir, 'production'));
    assert.deepEqual(expected.consumer_offsets, [{ partition: 0, consumer: 'merged-view', next_seq: EVENTS + 1 }]);
    assert.ok((expected.view_counters as { name: string }[]).some((c) => c.name === 'discarded'), 'the merge window discarded something');
    assert.ok((expected.identity_nodes as { parent: string | null }[]).some((n) => n.parent !== null), 'some identities were joined');
    return { template, expected };
  })();
  return reference;
}

/** Up to six runs of a worker, each SIGKILLed at a random moment once its offset has moved; the number of kills before it caught up. */
async function killRepeatedly(dir: string, partitions: number, layout: ViewLayoutKind): Promise<number> {
  // Kill while the consumer is making progress: once its offset has moved, after a random delay.
  const rand = prng(Date.now() & 0xffff);
  let kills = 0;
  for (let i = 0; i < 6; i++) {
    const before = (await lagOf(dir)).next_seq;
    const worker = startWorker(dir, { partitions, layout, logLevel: 'warn' });
    const deadline = Date.now() + 30_000;
    try {
      while ((await lagOf(dir)).next_seq === before && Date.now() < deadline) {
        assertRunning(worker, `${layout} P=${partitions}, run ${i + 1} (before its kill)`);
        await new Promise((r) => setTimeout(r, 10));
      }
      await new Promise((r) => setTimeout(r, Math.floor(rand() * 150)));
      assertRunning(worker, `${layout} P=${partitions}, run ${i + 1} (at its kill)`);
    } finally {
      worker.child.kill('SIGKILL');
      await worker.exited;
    }
    const lag = await lagOf(dir);
    if (lag.lag_records === 0) break;
    kills++;
  }
  return kills;
}

/** Every table but the offsets equal to the reference's, row for row. */
function assertSameView(actual: Record<string, unknown[]>, expected: Record<string, unknown[]>, what: string): void {
  assertSameTables(actual, expected, what, { except: ['consumer_offsets'] });
}

const layoutFromEnv = process.env.ECAPI_VIEW_LAYOUT;

test(
  'SIGKILL at random points, restart: the same view as an uninterrupted run, with 1, 2 and 4 partitions',
  // Run with ECAPI_VIEW_LAYOUT=sharded (a pass of the suites in that layout) only the sharded test below runs: this one is
  // the same whatever the environment says (its workers are given the data-set layout), so it runs in the default pass.
  { timeout: 300_000, skip: layoutFromEnv === 'sharded' ? 'ECAPI_VIEW_LAYOUT=sharded: the data-set layout is covered without it; the sharded test below runs' : false },
  async () => {
    const { template, expected } = await referenceRun();
    for (const partitions of [1, 2, 4]) {
      const killed = tempDataDir(`ecapi-sigkill-run${partitions}-`);
      cpSync(template, killed, { recursive: true });
      const kills = await killRepeatedly(killed, partitions, 'data-sets');
      const started = await runUntilCaughtUp(killed, partitions, 'data-sets');
      assert.ok(kills >= 1, `P=${partitions}: expected at least one kill before the consumer caught up, got ${kills}`);
      assert.deepEqual([started.layout, started.partitions], ['data-sets', partitions], `P=${partitions}: the worker ran the data-set layout`);

      const actual = dumpView(viewDbFile(killed, 'production'));
      assert.deepEqual(
        actual.consumer_offsets,
        Array.from({ length: partitions }, (_, partition) => ({ partition, consumer: 'merged-view', next_seq: EVENTS + 1 })),
        `P=${partitions}: every partition's offset is past the queue`,
      );
      assertSameView(actual, expected, `P=${partitions}`);
    }
  },
);

test('sharded layout: SIGKILL at random points, restart: every part ends where an uninterrupted run of the data-set layout does, with P = 1, 2 and 4', { timeout: 300_000 }, async () => {
  const { template, expected } = await referenceRun();
  for (const partitions of [1, 2, 4]) {
    const killed = tempDataDir(`ecapi-sigkill-sharded${partitions}-`);
    cpSync(template, killed, { recursive: true });
    const kills = await killRepeatedly(killed, partitions, 'sharded');
    const started = await runUntilCaughtUp(killed, partitions, 'sharded');
    assert.ok(kills >= 1, `sharded P=${partitions}: expected at least one kill before the consumer caught up, got ${kills}`);

    // The layout really used: logged by the worker, recorded in view.db, named by `worker status`, and its record shards' files.
    const viewFile = viewDbFile(killed, 'production');
    assert.deepEqual([started.layout, started.partitions], ['sharded', partitions], `sharded P=${partitions}: the worker's "consumer started" line`);
    assert.deepEqual(viewLayoutOf(viewFile), { partitions, kind: 'sharded' }, `sharded P=${partitions}: the layout recorded in view.db`);
    const status = await cliJson<{ view_layout?: string; view_partitions?: number; lag_records: number }>(killed, ['worker', 'status']);
    assert.deepEqual([status.view_layout, status.view_partitions, status.lag_records], ['sharded', partitions, 0], `sharded P=${partitions}: worker status --json`);
    for (let k = 0; k < partitions; k++) assert.ok(existsSync(viewShardFile(viewFile, k)), `sharded P=${partitions}: record shard ${k}'s file`);
    assert.ok(!existsSync(viewShardFile(viewFile, partitions)), `sharded P=${partitions}: no record shard ${partitions}`);

    const actual = dumpView(viewFile);
    assert.deepEqual(
      actual.consumer_offsets,
      [
        ...Array.from({ length: partitions }, (_, partition) => ({ partition, consumer: 'merged-view', next_seq: EVENTS + 1 })),
        ...Array.from({ length: partitions }, (_, shard) => ({ shard, consumer: 'merged-view', next_seq: EVENTS + 1 })),
      ],
      `sharded P=${partitions}: every identity part's and every record shard's offset is past the queue`,
    );
    assert.deepEqual(viewFences(viewFile), [], `sharded P=${partitions}: no part is left held`);
    // Records joined with their identity part's identity key (a record without one, or the reverse, differs), counters summed over the shards.
    assertSameView(actual, expected, `sharded P=${partitions}`);
  }
});
