/**
 * The sharded layout on real files and real threads (issue 30): a queue of many segments (re-sends
 * across segments, identifiers shared between events, two data sets) applied by P = 2 record-shard
 * threads and P = 2 identity-part threads with a small batch size (so a shard's reads stop inside
 * segments and carry their records, skipping other shards' records), read through the sharded view,
 * gives exactly what one data-set partition applying the same queue gives: every record (identity
 * resolved), every identity, every counter, the export order.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SqliteEventQueue } from '../../src/queue/sqlite-event-queue.js';
import { SqlitePartitions } from '../../src/consumer/sqlite-partitions.js';
import { SqliteQueueSource } from '../../src/consumer/sqlite-queue-source.js';
import { ViewConsumer } from '../../src/consumer/view-consumer.js';
import { SqliteViewStore } from '../../src/merged-view/sqlite-view-store.js';
import { ShardedViewStore } from '../../src/merged-view/sharded-view-store.js';
import { viewPartitionFile, viewShardFile } from '../../src/merged-view/sqlite-view-layout.js';
import { join } from 'node:path';
import { tempDataDir } from '../helpers/server-process.js';
import { viewSnapshot } from '../helpers/view-snapshot.js';

const hex = (n: number) => n.toString(16).padStart(64, '0');
const T0 = Date.UTC(2026, 10, 20, 10);

async function fillQueue(file: string): Promise<number> {
  const queue = new SqliteEventQueue(file);
  let n = 0;
  for (let segment = 0; segment < 24; segment++) {
    const dataSetId = segment % 3 === 2 ? 'ds-b' : 'ds-a';
    const events = Array.from({ length: 25 }, (_, i) => {
      const k = segment * 25 + i;
      const id = k % 4 === 3 ? `e${(k * 7) % 90}` : k % 11 === 0 ? undefined : `e${k}`;
      return {
        data_set_id: dataSetId,
        ...(id ? { id } : {}),
        timestamp: 1_763_600_000 + k,
        event_type: k % 2 ? 'purchase' : 'page_view',
        value: k % 50,
        currency_code: 'USD',
        user_data: { email_address: [hex(k % 37)], ...(k % 5 === 0 ? { customer_identifier: `c${k % 13}` } : {}), ...(k % 6 === 0 ? { ifa: `ifa-${k % 9}` } : {}) },
      };
    });
    n += events.length;
    await queue.append({ requestId: `r${segment}`, keyId: 'key_test', dataSetId, receivedAt: T0 + segment * 600_000, policyVersion: 1, mergeWindowMs: 7 * 86_400_000, events, metas: events.map(() => undefined) });
  }
  await queue.close();
  return n;
}

test('sharded layout on threads = one data-set partition, record by record, identity by identity, counter by counter', { timeout: 120_000 }, async () => {
  const dir = tempDataDir('ecapi-sharded-');
  const queueFile = join(dir, 'queue.db');
  const total = await fillQueue(queueFile);

  // Reference: one data-set partition (view-applier.ts) over the whole queue.
  const referenceStore = new SqliteViewStore(join(dir, 'reference.db'));
  const source = new SqliteQueueSource(queueFile);
  assert.equal(await new ViewConsumer(referenceStore, source, { batchSize: 2000, mergeWindowMs: () => 7 * 86_400_000 }).drain(), total);
  await source.close();

  const viewFile = join(dir, 'view.db');
  const partitions = new SqlitePartitions({ queueFile, viewFile, partitions: 2, batchSize: 7, windows: () => [], sharded: true });
  const applied = await partitions.drain();
  await partitions.release();
  assert.equal(applied, 2 * total, 'each record applied once by its shard and once by its identity part');

  const sharded = new ShardedViewStore(
    [0, 1].map((k) => new SqliteViewStore(viewShardFile(viewFile, k))),
    [0, 1].map((k) => new SqliteViewStore(viewPartitionFile(viewFile, k))),
  );
  try {
    for (const dataSetId of ['ds-a', 'ds-b']) {
      const want = await viewSnapshot(referenceStore, dataSetId);
      const got = await viewSnapshot(sharded, dataSetId);
      assert.ok(want.records.length > 50 && want.records.some((r) => r.mergedCount > 1) && want.records.some((r) => (r.identity?.absorbedKeys.length ?? 0) > 0), 'the queue has re-sends and unions');
      assert.deepEqual(got.records, want.records, `${dataSetId}: records and identities`);
      assert.deepEqual(got.counters, want.counters, `${dataSetId}: counters`);
    }
    assert.equal(await sharded.offset('merged-view'), total + 1);
  } finally {
    await sharded.close();
    await referenceStore.close();
  }
});
