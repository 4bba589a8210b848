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
