/**
 * Segments queued before queues kept the merge window they were accepted under (merge_window_ms
 * NULL: written by versions before it, queue/event-queue.ts) get their data set's window once, by
 * the consumer at its start, before any partition applies a record (consumer/sqlite-consumer.ts).
 *
 * Why: a re-send is merged or discarded by the window its record was accepted under, so every part
 * of the sharded layout (a record shard, the identity part) decides it alike whenever each applies
 * it (consumer/identity-stage-applier.ts, "Decisions"). A record without one used to take its
 * data set's window at apply time: two parts apart over it while the policy changed could decide
 * it differently. Stamped, the decision is a function of the queue again.
 *
 * - Batches of BATCH_ROWS per UPDATE, each its own short transaction: ingest waits for one batch at
 *   most. The partial index (sqlite-queue-store.ts UNSTAMPED_SEGMENTS_INDEX) finds them; once none
 *   is left, a start costs one empty index probe.
 * - Rows a writer of this version stores always carry a window; an older binary writing into the
 *   same data dir after this ran is not supported (upgrade: stop, replace, start).
 */
import type Database from 'better-sqlite3';

const BATCH_ROWS = 5_000;

/** Stamps every unstamped segment with `windowOf(its data set)`; returns how many segments it stamped. */
export function stampLegacyMergeWindows(db: Database.Database, windowOf: (dataSetId: string) => number): number {
  db.function('ecapi_merge_window_of', (dataSetId) => windowOf(dataSetId as string));
  const stamp = db.prepare(
    `UPDATE queue_segments SET merge_window_ms = ecapi_merge_window_of(data_set_id)
      WHERE first_seq IN (SELECT first_seq FROM queue_segments WHERE merge_window_ms IS NULL ORDER BY first_seq LIMIT ${BATCH_ROWS})`,
  );
  let stamped = 0;
  for (;;) {
    const { changes } = stamp.run();
    if (changes === 0) return stamped;
    stamped += changes;
  }
}
