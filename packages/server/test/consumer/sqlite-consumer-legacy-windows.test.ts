/**
 * The embedded consumer stamps the segments an earlier version queued without their merge window
 * before any partition applies one (consumer/sqlite-consumer.ts, queue/sqlite-legacy-windows.ts), on
 * both layouts. The test tells the two windows apart: the stamp asks `mergeWindowMs` (a day), while
 * the partitions' own policy (`mergeWindows`, what an unstamped record would take at apply time) says
 * one hour, as if the policy changed right after the start. Each event is re-sent two hours after it
 * was first received: a record decided by the stamped window merges the re-send, one decided at
 * apply time discards it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { runSqliteConsumer } from '../../src/consumer/sqlite-consumer.js';
import { SqlitePartitionedView } from '../../src/merged-view/partitioned-view-store.js';
import { openQueueDatabase } from '../../src/queue/sqlite-queue-store.js';
import { createLogger } from '../../src/observability/logger.js';
import { tempDataDir } from '../helpers/server-process.js';
import { createLegacyQueueFile } from '../helpers/legacy-queue-file.js';
import { waitFor } from '../helpers/fault-tools.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const T0 = Date.UTC(2026, 10, 20, 10);
const EVENTS = 40;
const hex = (n: number) => n.toString(16).padStart(64, '0');

for (const layout of ['data-sets', 'sharded'] as const) {
  test(`${layout} layout: segments queued without a window are decided by the window stamped at the start, not the policy at apply time`, { timeout: 60_000 }, async () => {
    const dir = tempDataDir('ecapi-legacy-consumer-');
    const queueFile = join(dir, 'queue.db');
    const old = createLegacyQueueFile(queueFile);
    const insert = old.prepare('INSERT INTO queue_segments VALUES (?, ?, ?, \'ds\', \'key_test\', ?, 1, ?, NULL)');
    const eventsOf = (from: number) =>
      Array.from({ length: 10 }, (_, i) => ({ data_set_id: 'ds', id: `e${from + i}`, timestamp: T0 / 1000, event_type: 'purchase', value: from + i, currency_code: 'USD', user_data: { email_address: [hex(from + i)] } }));
    let seq = 1;
    for (const received of [T0, T0 + 2 * HOUR]) {
      for (let from = 0; from < EVENTS; from += 10) {
        insert.run(seq, 10, received, `r${seq}`, JSON.stringify(eventsOf(from)));
        seq += 10;
      }
    }
    old.close();

    const viewFile = join(dir, 'view.db');
    const view = new SqlitePartitionedView(viewFile);
    let stop!: () => void;
    const stopped = new Promise<void>((resolve) => (stop = resolve));
    const run = runSqliteConsumer(view, { env: 'production', queueFile, viewFile }, {
      logger: createLogger({ level: 'silent' }),
      stopped,
      batchSize: 7,
      pollMs: 10,
      viewPartitions: 2,
      viewLayout: layout,
      mergeWindowMs: () => DAY,
      mergeWindows: () => [['ds', HOUR]],
    });
    try {
      await waitFor('the consumer to apply the queue', async () => (await view.offset('merged-view')) === seq, 30_000);
    } finally {
      stop();
      await run;
    }
    try {
      const records: { id: string; mergedCount: number }[] = [];
      await view.exportRecords('ds', 0, (page) => void records.push(...page.map((r) => ({ id: r.recordKey, mergedCount: r.mergedCount }))));
      assert.equal(records.length, EVENTS);
      assert.deepEqual([...new Set(records.map((r) => r.mergedCount))], [2], 'every re-send merged: decided by the stamped day, not the hour');
      const db = openQueueDatabase(queueFile);
      try {
        assert.deepEqual(db.prepare('SELECT DISTINCT merge_window_ms FROM queue_segments').pluck().all(), [DAY]);
      } finally {
        db.close();
      }
    } finally {
      await view.close();
    }
  });
}
