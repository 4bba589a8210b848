/**
 * The PostgreSQL profile's counterpart of queue/sqlite-legacy-windows.ts: segments queued before
 * queues kept the merge window they were accepted under (merge_window_ms NULL: written before
 * migration 8) get their data set's window once, by each worker at its start, before it applies a
 * record (consumer/postgres-partitions.ts). So every lane of the sharded layout (record shards, the
 * identity part) decides a re-send by the same window whenever each applies it.
 *
 * - Found through the partial index of migration 9 (`queue_segments_unstamped`), which no row a
 *   writer of this version stores enters: once none is left, a start costs one empty index probe.
 * - Batches of BATCH_ROWS, each its own statement. Workers starting together stamp the same rows
 *   without harm: `merge_window_ms IS NULL` is checked again on the locked row (READ COMMITTED), so
 *   the first commit wins, and a worker's lanes start only once it found none left.
 * - A node older than migration 8 still accepting during a rolling upgrade queues segments without a
 *   window after this ran. A lane never applies one: its reads go through `readingStamped`, which
 *   stamps every unstamped segment (this same first-commit-wins statement) when a page holds one, and
 *   reads the page again. So every lane of the sharded layout meets such a segment with the window
 *   the first stamp committed, whichever lane reads it first and whatever the policy is by then.
 */
import type { Pool } from 'pg';
import type { QueueRecord } from './event-queue.js';

const BATCH_ROWS = 5_000;
/**
 * Stamp-and-read rounds before a read gives up (the batch fails and is retried with the lane's
 * backoff): each round stamps every segment then queued, so a page meets a new unstamped one only if
 * an older node queued it into the page between the round's stamp and its read.
 */
const STAMP_ROUNDS = 3;

/** Stamps every unstamped segment with `windowOf(its data set)`; returns how many segments this call stamped. */
export async function stampLegacyMergeWindowsPostgres(pool: Pool, windowOf: (dataSetId: string) => number): Promise<number> {
  let stamped = 0;
  for (;;) {
    const { rows } = await pool.query<{ first_seq: string; data_set_id: string }>(
      `SELECT first_seq, data_set_id FROM queue_segments WHERE merge_window_ms IS NULL ORDER BY first_seq LIMIT ${BATCH_ROWS}`,
    );
    if (rows.length === 0) return stamped;
    const result = await pool.query(
      `UPDATE queue_segments s SET merge_window_ms = v.w
         FROM unnest($1::bigint[], $2::bigint[]) AS v(seq, w)
        WHERE s.first_seq = v.seq AND s.merge_window_ms IS NULL`,
      [rows.map((r) => r.first_seq), rows.map((r) => windowOf(r.data_set_id))],
    );
    stamped += result.rowCount ?? 0;
  }
}

/**
 * A lane's read (`read`: one page of a partition's records) that never returns a record without its
 * merge window: when the page holds one, every unstamped segment is stamped (`stamp`) and the page
 * read again. The check is one pass over the page's records, nothing when all carry a window.
 */
export function readingStamped(
  read: (fromSeq: number, limit: number) => Promise<QueueRecord[]>,
  stamp: () => Promise<number>,
): (fromSeq: number, limit: number) => Promise<QueueRecord[]> {
  return async (fromSeq, limit) => {
    let records = await read(fromSeq, limit);
    for (let round = 0; hasUnstamped(records); round++) {
      if (round === STAMP_ROUNDS) {
        throw new Error('segments without a merge window keep arriving: a node older than migration 8 is still queueing; the batch is retried');
      }
      await stamp();
      records = await read(fromSeq, limit);
    }
    return records;
  };
}

function hasUnstamped(records: readonly QueueRecord[]): boolean {
  for (let i = 0; i < records.length; i++) if (records[i]!.merge_window_ms == null) return true;
  return false;
}
