/**
 * Queue partitions: records are assigned to one of QUEUE_PARTITIONS partitions by their data set,
 * so that everything the merged view keeps per data set (records, identities, counters) is
 * written by one consumer at a time, and several `worker` processes can share the queue by
 * leasing partitions. FNV-1a (consumer/data-set-partition.ts): stable across processes, versions
 * and machines.
 */
import { partitionOf as partitionAmong } from '../consumer/data-set-partition.js';
import { QUEUE_PARTITIONS } from './migrations.js';

export function partitionOf(dataSetId: string): number {
  return partitionAmong(dataSetId, QUEUE_PARTITIONS);
}

export const partitionConsumer = (consumer: string, part: number) => `${consumer}/p${String(part).padStart(2, '0')}`;
