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
 *   window after this ran; the worker's next start stamps them, and until then they take their data
 *   set's window at apply time (consumer/view-applier.ts mergeWindowOf), as before.
 */
import type { Pool } from 'pg';

const BATCH_ROWS = 5_000;

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
