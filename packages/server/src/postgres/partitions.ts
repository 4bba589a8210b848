/**
 * Queue partitions of the PostgreSQL profile: records are assigned to one of QUEUE_PARTITIONS
 * partitions by their data set, so that everything the merged view keeps per data set (records,
 * identities, counters) is written by one consumer at a time, and several `worker` processes can
 * share the queue by leasing partitions (consumer/postgres-partitions.ts). FNV-1a
 * (model/data-set-partition.ts): stable across processes, versions and machines. Each partition's
 * offset is named by model/consumer-offsets.ts `partitionConsumer`.
 */
import { partitionAmong } from '../model/data-set-partition.js';
import { QUEUE_PARTITIONS } from './migrations.js';

/** The PostgreSQL queue partition (0 … QUEUE_PARTITIONS-1) of a data set's records. */
export function queuePartitionOf(dataSetId: string): number {
  return partitionAmong(dataSetId, QUEUE_PARTITIONS);
}
