/**
 * Names of the rows of the consumer offset table (`consumer_offsets`, one per consumer: the next
 * queue sequence number it applies), which the view store keeps in the same transaction as what a
 * batch wrote (merged-view/view-store.ts `offset`, `offsets`), the consumer advances
 * (consumer/view-consumer.ts), and the lifecycle and `worker status` read.
 */

/** The merged-view consumer's name in the offset table (the embedded view: one row per partition file). */
export const VIEW_CONSUMER = 'merged-view';

/** The offset row of one PostgreSQL queue partition of a consumer: `merged-view/p03`. */
export const partitionConsumer = (consumer: string, part: number) => `${consumer}/p${String(part).padStart(2, '0')}`;

/** The offset row of record shard `shard` of a PostgreSQL queue partition (the sharded layout): `merged-view/p03/s1`. */
export const shardConsumer = (consumer: string, part: number, shard: number) => `${partitionConsumer(consumer, part)}/s${shard}`;

/**
 * The queue partition an offset row of `consumer` belongs to (`<consumer>/pNN` or a shard's
 * `<consumer>/pNN/sK`), or null for another row.
 */
export function queuePartitionOfConsumer(consumer: string, name: string): number | null {
  if (!name.startsWith(`${consumer}/p`)) return null;
  const match = /^(\d+)(?:\/s\d+)?$/.exec(name.slice(consumer.length + 2));
  return match ? Number(match[1]) : null;
}

/**
 * Per queue partition (0 … partitions-1), the lowest offset of its rows (`offsets`: name → next
 * sequence): what every part of the partition has applied (1 where none has a row).
 */
export function partitionOffsets(consumer: string, offsets: ReadonlyMap<string, number>, partitions: number): number[] {
  const lowest: (number | undefined)[] = Array.from({ length: partitions }, () => undefined);
  for (const [name, next] of offsets) {
    const part = queuePartitionOfConsumer(consumer, name);
    if (part === null || part >= partitions) continue;
    lowest[part] = Math.min(lowest[part] ?? next, next);
  }
  return lowest.map((next) => next ?? 1);
}
