/**
 * Partitioning of the asynchronous side by data set. Everything the merged view keeps is per data
 * set (records, identities, counters): no rule ever relates two data sets, so partitions by data
 * set can be applied in parallel, each in queue order, with no coordination and no cross-partition
 * identity problem (an identifier links events of one data set only). FNV-1a: stable across
 * processes, versions and machines.
 */
export function dataSetHash(dataSetId: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < dataSetId.length; i++) {
    hash ^= dataSetId.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

/**
 * The partition (0 … count-1) of a data set among `count`: the embedded view's P partition files
 * (merged-view/sqlite-view-layout.ts) and, through postgres/partitions.ts `queuePartitionOf`, the
 * PostgreSQL queue's partitions.
 */
export function partitionAmong(dataSetId: string, count: number): number {
  return dataSetHash(dataSetId) % count;
}
