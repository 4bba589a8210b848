/**
 * Queue partitions: records are assigned to one of QUEUE_PARTITIONS partitions by their data set,
 * so that everything the merged view keeps per data set (records, identities, counters) is
 * written by one consumer at a time, and several `worker` processes can share the queue by
 * leasing partitions. FNV-1a: stable across processes, versions and machines.
 */
import { QUEUE_PARTITIONS } from './migrations.js';

export function partitionOf(dataSetId: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < dataSetId.length; i++) {
    hash ^= dataSetId.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % QUEUE_PARTITIONS;
}

export const partitionConsumer = (consumer: string, part: number) => `${consumer}/p${String(part).padStart(2, '0')}`;
