/**
 * Offset row names (model/consumer-offsets.ts): a PostgreSQL queue partition's rows in both view
 * layouts (merged-view/postgres-view-layout.ts), and the lowest offset per partition that lag,
 * queue retention and the lifecycle read.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { partitionConsumer, partitionOffsets, queuePartitionOfConsumer, shardConsumer, VIEW_CONSUMER } from '../../src/model/consumer-offsets.js';
import { partitionLanes, viewLanes } from '../../src/merged-view/postgres-view-layout.js';

test('offset row names: a partition row and its shards name their queue partition; other rows none', () => {
  assert.equal(partitionConsumer(VIEW_CONSUMER, 3), 'merged-view/p03');
  assert.equal(shardConsumer(VIEW_CONSUMER, 3, 1), 'merged-view/p03/s1');
  assert.equal(queuePartitionOfConsumer(VIEW_CONSUMER, 'merged-view/p03'), 3);
  assert.equal(queuePartitionOfConsumer(VIEW_CONSUMER, 'merged-view/p15/s0'), 15);
  for (const other of ['merged-view', 'merged-view/p', 'merged-view/p03/x', 'merged-view/p03/s', 'other/p03', 'merged-viewx/p03']) {
    assert.equal(queuePartitionOfConsumer(VIEW_CONSUMER, other), null, other);
  }
});

test('partitionOffsets: the lowest of a partition rows, 1 where it has none; other rows and partitions ignored', () => {
  const offsets = new Map([
    ['merged-view/p00', 40],
    ['merged-view/p00/s0', 12],
    ['merged-view/p00/s1', 55],
    ['merged-view/p02', 9],
    ['merged-view/p20', 3], // beyond the partitions asked for
    ['other/p01', 2],
  ]);
  assert.deepEqual(partitionOffsets(VIEW_CONSUMER, offsets, 4), [12, 1, 9, 1]);
});

test('lanes of the PostgreSQL layouts: one per partition, or an identity part and S shards each, with distinct leases and rows', () => {
  const dataSets = viewLanes({ kind: 'data-sets', shards: 0 });
  assert.equal(dataSets.length, 16);
  assert.ok(dataSets.every((lane, i) => lane.lease === i && lane.part === i && lane.role === 'data-set' && lane.consumer === partitionConsumer(VIEW_CONSUMER, i)));
  const sharded = viewLanes({ kind: 'sharded', shards: 3 });
  assert.equal(sharded.length, 64);
  assert.equal(new Set(sharded.map((lane) => lane.consumer)).size, 64);
  assert.deepEqual(
    partitionLanes({ kind: 'sharded', shards: 3 }, 5).map((lane) => [lane.lease, lane.role, lane.shard, lane.consumer]),
    [
      [5, 'identities', 0, 'merged-view/p05'],
      [21, 'records', 0, 'merged-view/p05/s0'],
      [37, 'records', 1, 'merged-view/p05/s1'],
      [53, 'records', 2, 'merged-view/p05/s2'],
    ],
  );
});
