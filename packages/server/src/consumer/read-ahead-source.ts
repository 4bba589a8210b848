/**
 * A queue source that reads a lane's next batch while the current one is applied (the PostgreSQL
 * profile, postgres-partitions.ts). A lane is one serial chain: read the batch's segments (a round
 * trip, the server decompressing and sending them, the worker parsing them), then apply it in one
 * transaction (more round trips, the commit's fsync). Reading batch N+1 while batch N's transaction
 * runs overlaps the two on a pool connection of its own.
 *
 * What keeps it exact:
 * - A read-ahead is used only for the very read it was made for (same `fromSeq` and `limit`): when
 *   another consumer moved the offset meanwhile, or the batch was rolled back and is read again
 *   from elsewhere, it is dropped.
 * - It is used only when it found records. Records become visible in queue order (appends commit
 *   under the queue head's lock), so a non-empty read-ahead is the queue's records from `fromSeq`
 *   on, up to its last one, as a fresh read would return them (perhaps fewer: the rest comes with
 *   the next batch). An empty one is not trusted: it is older than the lane's read of the queue
 *   head (queue-head-watch.ts), and "nothing found" is what lets the lane rest; so the read is made
 *   again, as without read-ahead.
 * - Erasure: a deletion waits until the consumer's offset has passed its bound before it rewrites
 *   the queue (lifecycle), and a read-ahead only holds records past the offset, which no eraser has
 *   touched yet; what is suppressed is decided when the batch is applied, as before.
 * - Memory: one batch ahead per lane that is applying, none for an idle lane.
 */
import type { QueueRecord } from '../queue/event-queue.js';
import type { QueueSource } from './view-consumer.js';

export function readingAhead(read: (fromSeq: number, limit: number) => Promise<QueueRecord[]>): QueueSource & { readonly used: () => number } {
  let ahead: { fromSeq: number; limit: number; records: Promise<QueueRecord[] | null> } | null = null;
  let used = 0;
  return {
    used: () => used,
    async read(fromSeq, limit) {
      const mine = ahead !== null && ahead.fromSeq === fromSeq && ahead.limit === limit ? await ahead.records : null;
      ahead = null;
      let records: QueueRecord[];
      if (mine !== null && mine.length > 0) {
        records = mine;
        used++;
      } else {
        records = await read(fromSeq, limit);
      }
      if (records.length > 0) {
        const next = records[records.length - 1]!.seq + 1;
        // A failed read-ahead is forgotten: the next read is made as usual, and fails or not then.
        ahead = { fromSeq: next, limit, records: read(next, limit).catch(() => null) };
      }
      return records;
    },
    async close() {
      ahead = null;
    },
  };
}
