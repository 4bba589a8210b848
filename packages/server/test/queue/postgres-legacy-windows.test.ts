/**
 * Segments queued before migration 8 (no merge window) on PostgreSQL (queue/postgres-legacy-windows.ts):
 * found through migration 9's partial index, each given its data set's window, by two workers
 * stamping at once without harm; a segment with a window is never touched.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { stampLegacyMergeWindowsPostgres } from '../../src/queue/postgres-legacy-windows.js';
import { migratedPool, pgOnly } from '../helpers/postgres.js';

const LEGACY_ROWS = 12_345; // more than two batches of the stamp

test('PostgreSQL: segments queued without a window get their data set\'s window once, by two workers at once; segments with one are never touched', pgOnly, async () => {
  const pool = await migratedPool('legacy_windows');
  try {
    await pool.query(
      `INSERT INTO queue_segments (first_seq, event_count, received_at, data_set_id, key_id, request_id, policy_version, part, raw, events, metas, merge_window_ms)
       SELECT g, 1, 1700000000000, CASE WHEN g % 3 = 0 THEN 'ds-b' ELSE 'ds-a' END, 'key_test', 'r' || g, 1, g % 16, false, '[]', NULL,
              CASE WHEN g = $1 THEN 1500 END
         FROM generate_series(1, $1) AS g`,
      [LEGACY_ROWS + 1],
    );
    await pool.query('ANALYZE queue_segments');
    const client = await pool.connect();
    let plan: string;
    try {
      await client.query('SET enable_seqscan = off'); // this connection only: to show the index can serve it
      plan = (await client.query('EXPLAIN SELECT first_seq FROM queue_segments WHERE merge_window_ms IS NULL ORDER BY first_seq LIMIT 5000')).rows.map((r) => r['QUERY PLAN']).join('\n');
      await client.query('RESET enable_seqscan');
    } finally {
      client.release();
    }
    assert.match(plan, /queue_segments_unstamped/, `the partial index (migration 9) serves the search:\n${plan}`);

    const windows = new Map([['ds-a', 3_600_000], ['ds-b', 86_400_000]]);
    const both = await Promise.all([0, 1].map(() => stampLegacyMergeWindowsPostgres(pool, (ds) => windows.get(ds)!)));
    assert.equal(both[0]! + both[1]!, LEGACY_ROWS, 'each segment stamped once, by one of the two');
    const byWindow = (await pool.query('SELECT data_set_id, merge_window_ms::int AS w, COUNT(*)::int AS n FROM queue_segments GROUP BY 1, 2 ORDER BY 1, 2')).rows;
    assert.deepEqual(byWindow, [
      { data_set_id: 'ds-a', w: 1_500, n: 1 },
      { data_set_id: 'ds-a', w: 3_600_000, n: LEGACY_ROWS + 1 - 1 - Math.floor(LEGACY_ROWS / 3) },
      { data_set_id: 'ds-b', w: 86_400_000, n: Math.floor(LEGACY_ROWS / 3) },
    ]);

    // Once stamped, a changed policy changes nothing.
    windows.set('ds-a', 60_000);
    assert.equal(await stampLegacyMergeWindowsPostgres(pool, (ds) => windows.get(ds)!), 0);
  } finally {
    await pool.end();
  }
});
