/**
 * `identities forget --suppress` against a consumer batch caught between its queue read and its
 * write lock (consumer/view-consumer.ts): the batch read a re-send of the person's
 * events with the suppression list as it was before the request, then (a consumer at nice 10 on a
 * saturated machine) did not get the CPU until the request had stored its suppression, deleted the
 * person's records and finished. When it takes the view's write lock it must apply under the new
 * list: nothing of the person may come back. Real queue, view and lifecycle files, the real
 * LifecycleRunner and SqliteLifecycleBackend; the only control is when the batch's read returns.
 *
 * On PostgreSQL a batch reads the list with its lane's offset row locked, and the request's first
 * view deletion locks the data set's lane rows first (lifecycle/postgres-view-eraser.ts): the second
 * test holds a batch open after it applied the re-send under the old list, lets the request run
 * until it completes or waits on a lock, then commits the batch: the re-send must be deleted too.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ControlPlane } from '../../src/control/control-plane.js';
import { SqliteQueueSource } from '../../src/consumer/sqlite-queue-source.js';
import { ViewConsumer, type QueueSource } from '../../src/consumer/view-consumer.js';
import { LifecycleRunner } from '../../src/lifecycle/lifecycle-runner.js';
import { SqliteLifecycleBackend } from '../../src/lifecycle/sqlite-lifecycle-backend.js';
import { lifecycleDbFile, SuppressionList } from '../../src/lifecycle/sqlite-lifecycle-store.js';
import { recordKeyForId } from '../../src/merged-view/merge.js';
import { viewPartitionFile } from '../../src/merged-view/sqlite-view-layout.js';
import { SqliteViewStore } from '../../src/merged-view/sqlite-view-store.js';
import { createLogger } from '../../src/observability/logger.js';
import type { QueueAppend } from '../../src/queue/event-queue.js';
import { sha } from '../helpers/event-generator.js';
import { openEmbeddedModelRun } from '../helpers/embedded-model-run.js';
import { tempDataDir } from '../helpers/server-process.js';
import { applyRecords } from '../../src/consumer/view-applier.js';
import { PostgresSuppressionList } from '../../src/lifecycle/postgres-lifecycle-store.js';
import { partitionConsumer, VIEW_CONSUMER } from '../../src/model/consumer-offsets.js';
import { queuePartitionOf } from '../../src/postgres/partitions.js';
import { openModelLanes, resetModelDatabase } from '../helpers/postgres-model-lanes.js';
import { pgOnly } from '../helpers/postgres.js';
import { createPool } from '../../src/postgres/database.js';

const WEEK_MS = 7 * 86_400_000;
const noDataSets = { listDataSets: async () => [] } as unknown as ControlPlane;

/** A purchase `id` of data set `shop` carrying the person's email hash, as the serving process queues it. */
function purchaseOf(id: string, email: string): QueueAppend {
  return {
    requestId: `req-${id}`, keyId: 'key_test', dataSetId: 'shop', receivedAt: Date.now(), policyVersion: 1, mergeWindowMs: WEEK_MS,
    events: [{ data_set_id: 'shop', id, timestamp: Math.floor(Date.now() / 1000), event_type: 'purchase', user_data: { email_address: [email] } }],
    metas: [undefined],
  };
}

test('a batch that read a re-send before forget --suppress and takes the write lock after its deletions applies under the new list', { timeout: 60_000 }, async () => {
  const dataDir = tempDataDir('ecapi-suppress-lock-');
  const { envDir, queueFile, viewFile, queue, view } = openEmbeddedModelRun(dataDir, 'production', { partitions: 1, kind: 'data-sets' });
  const store = new SqliteViewStore(viewPartitionFile(viewFile, 0));
  const inner = new SqliteQueueSource(queueFile, { accept: () => true });
  /** Runs after a batch's queue read, before it takes the write lock. */
  let afterRead: () => Promise<void> = async () => {};
  const source: QueueSource = {
    read: async (from, limit) => (await source.readBatch!(from, limit)).records,
    readBatch: async (from, limit) => {
      const batch = await inner.readBatch(from, limit);
      const run = afterRead;
      afterRead = async () => {};
      await run();
      return batch;
    },
    close: () => inner.close(),
  };
  const suppressions = new SuppressionList(lifecycleDbFile(envDir));
  const consumer = new ViewConsumer(store, source, {
    batchSize: 100,
    mergeWindowMs: () => WEEK_MS,
    suppressions,
  });
  const backend = new SqliteLifecycleBackend(dataDir, 'production');
  const runner = new LifecycleRunner({ backend, controlPlane: noDataSets, logger: createLogger({ level: 'silent' }), minFreeBytes: 0 });
  const email = sha('forget-me@example.com');
  const append = (id: string) => queue.append(purchaseOf(id, email));
  try {
    const first = await append('order-1');
    await consumer.drain();
    assert.ok(await store.getRecord('shop', recordKeyForId('order-1')), 'the person has a record before the request');

    const request = await backend.store.request({ dataSetId: 'shop', kind: 'forget_identifier', target: `email:${email}`, suppress: true, boundSeq: first.firstSeq, actor: 'test' });
    await append('order-2'); // sent after the request
    // The list as a consumer had it just before this batch: nothing suppressed yet.
    suppressions.refresh();
    assert.equal(suppressions.suppressed('shop', [`email:${email}`]), false);
    afterRead = async () => {
      // The request runs to its end while the batch holds order-2, read but not applied.
      for (let ticks = 0; (await backend.store.get(request.id))!.doneAt === null; ticks++) {
        assert.ok(ticks < 20, 'the request did not complete');
        await runner.tick();
      }
    };
    const step = await consumer.step();
    assert.equal(step.records, 1, 'the batch held order-2');
    assert.equal((await backend.store.get(request.id))!.result!.view_records, 1, 'the request deleted order-1');

    assert.equal(await store.getRecord('shop', recordKeyForId('order-2')), null, 'order-2 came back after the request');
    assert.equal(await store.getRecord('shop', recordKeyForId('order-1')), null);
    const suppressed = (await store.counters('shop', 0)).filter((c) => c.name === 'suppressed').reduce((n, c) => n + c.n, 0);
    assert.equal(suppressed, 1, 'order-2 was counted suppressed');
  } finally {
    await queue.close();
    suppressions.close();
    await source.close();
    await store.close();
    await backend.close();
    await view.close();
  }
});

test('PostgreSQL: a batch applied under the old list while a forget --suppress runs is deleted by it (the eraser waits for the lane)', { ...pgOnly, timeout: 90_000 }, async () => {
  const url = await resetModelDatabase(null, 'suppression_under_lock', 'production');
  const pg = await openModelLanes(url, 'production', ['shop'], () => ({ batchSize: 100, mergeWindowMs: () => WEEK_MS }));
  // As the worker's: a pool of its own, since the batch reads the list inside its transaction.
  const listPool = createPool(url, 'production', { max: 1 });
  const suppressions = new PostgresSuppressionList(listPool);
  /** Runs inside a batch's transaction, after it applied its records, before its commit. */
  let beforeCommit: (() => Promise<void>) | null = null;
  const consumer = new ViewConsumer(pg.view, { read: (fromSeq, limit) => pg.queue.read({ fromSeq, limit }), close: async () => {} }, {
    consumer: partitionConsumer(VIEW_CONSUMER, queuePartitionOf('shop')),
    batchSize: 100,
    mergeWindowMs: () => WEEK_MS,
    suppressions,
    applier: async (tx, records, options) => {
      const result = await applyRecords(tx, records, options);
      const hook = beforeCommit;
      beforeCommit = null;
      if (hook) await hook();
      return result;
    },
  });
  const runner = new LifecycleRunner({ backend: pg.lifecycle, controlPlane: noDataSets, logger: createLogger({ level: 'silent' }), minFreeBytes: 0 });
  const email = sha('forget-me-too@example.com');
  const append = (id: string) => pg.queue.append(purchaseOf(id, email));
  try {
    const first = await append('order-1');
    await consumer.drain();
    const request = await pg.lifecycle.store.request({ dataSetId: 'shop', kind: 'forget_identifier', target: `email:${email}`, suppress: true, boundSeq: first.firstSeq, actor: 'test' });
    await append('order-2');
    const done = async () => (await pg.lifecycle.store.get(request.id))!.doneAt !== null;
    let running: Promise<void> = Promise.resolve();
    let waited = false;
    beforeCommit = async () => {
      // order-2 is applied under the old list, not committed: the request runs now.
      running = (async () => {
        for (let ticks = 0; !(await done()); ticks++) {
          assert.ok(ticks < 20, 'the request did not complete');
          await runner.tick();
        }
      })();
      for (let polls = 0; ; polls++) {
        assert.ok(polls < 1_000, 'the request neither completed nor waited for the batch');
        const { rows } = await pg.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'");
        if (rows[0]!.n > 0) {
          waited = true;
          return;
        }
        if (await done()) return;
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    assert.equal((await consumer.step()).records, 1, 'the batch applied order-2');
    await running;
    assert.ok(waited, 'the request waited for the batch holding its lane');
    assert.equal(await pg.view.getRecord('shop', recordKeyForId('order-2')), null, 'order-2 came back after the request');
    assert.equal(await pg.view.getRecord('shop', recordKeyForId('order-1')), null);
    // Later batches apply under the new list.
    await append('order-3');
    await consumer.drain();
    assert.equal(await pg.view.getRecord('shop', recordKeyForId('order-3')), null, 'order-3 applied after the request');
  } finally {
    await pg.close();
    await listPool.end();
  }
});
