/**
 * Sharding of the merged records by record key (the sharded layout, identity-stage-applier.ts):
 * a record `(data_set_id, record key)` lives in shard `FNV-1a(data_set_id NUL record key) mod P`,
 * so one data set's records spread over every shard, and every queued record of one key (its
 * re-sends) goes to the same shard, in queue order. The key is taken from the queued event before
 * normalization (merge.ts recordKeyOf reads only `id`, which normalization leaves alone).
 */
import { recordKeyOf, type JsonObject } from '../merged-view/merge.js';
import type { QueueRecord } from '../queue/event-queue.js';
import { dataSetHash } from './data-set-partition.js';

/** The shard (0 … shards-1) of a record of the merged view. */
export function recordShardOf(dataSetId: string, recordKey: string, shards: number): number {
  return shards === 1 ? 0 : dataSetHash(`${dataSetId}\u0000${recordKey}`) % shards;
}

/** The shard of the merged record a queued record merges into. */
export function queuedRecordShard(record: QueueRecord, shards: number): number {
  return shards === 1 ? 0 : recordShardOf(record.data_set_id, recordKeyOf(record.event as JsonObject, record.seq), shards);
}
