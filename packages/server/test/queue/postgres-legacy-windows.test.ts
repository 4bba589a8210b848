/**
 * Segments queued before migration 8 (no merge window) on PostgreSQL (queue/postgres-legacy-windows.ts):
 * found through migration 9's partial index, each given its data set's window, by two workers
 * stamping at once without harm; a segment with a window is never touched. Segments an older node
 * queues after a worker's start are stamped by the first lane that reads them (`readingStamped`),
 * and every lane then reads the same window, whatever window each lane's policy says.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readSegments } from '../../src/queue/postgres-event-queue.js';
import { readingStamped, stampLegacyMergeWindowsPostgres } from '../../src/queue/postgres-legacy-windows.js';
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

test('PostgreSQL: a lane never reads a segment without its window; lanes with different policies read the window the first stamp committed', pgOnly, async () => {
  const pool = await migratedPool('legacy_windows_read');
  try {
    const PART = 3;
    const SEGMENTS = 40;
    // What an older node queues after the workers' start stamp: events with no window; one segment has one.
    await pool.query(
      `INSERT INTO queue_segments (first_seq, event_count, received_at, data_set_id, key_id, request_id, policy_version, part, raw, events, metas, merge_window_ms)
       SELECT g, 1, 1700000000000, 'ds-a', 'key_test', 'r' || g, 1, $2, false, '[{"id":"e' || g || '"}]', NULL, CASE WHEN g = 7 THEN 1500 END
         FROM generate_series(1, $1) AS g`,
      [SEGMENTS, PART],
    );
    const read = (fromSeq: number, limit: number) => readSegments(pool, { fromSeq, limit, part: PART });
    assert.ok((await read(1, SEGMENTS)).some((r) => r.merge_window_ms == null), 'the plain read meets segments without a window');

    // Two lanes whose policies disagree (one worker saw a change the other did not yet), reading at once.
    let stamps = 0;
    const lane = (window: number) =>
      readingStamped(read, async () => {
        stamps++;
        return stampLegacyMergeWindowsPostgres(pool, () => window);
      });
    const [a, b] = await Promise.all([lane(3_600_000)(1, SEGMENTS), lane(60_000)(1, SEGMENTS)]);
    assert.equal(a.length, SEGMENTS);
    assert.equal(b.length, SEGMENTS);
    assert.ok(a.every((r) => typeof r.merge_window_ms === 'number'), 'no record without a window');
    assert.deepEqual(a.map((r) => [r.seq, r.merge_window_ms]), b.map((r) => [r.seq, r.merge_window_ms]), 'both lanes read the same windows');
    const winner = a[0]!.merge_window_ms;
    assert.ok(winner === 3_600_000 || winner === 60_000);
    assert.deepEqual(new Set(a.filter((r) => r.seq !== 7).map((r) => r.merge_window_ms)), new Set([winner]), 'one stamp won for the whole page');
    assert.equal(a.find((r) => r.seq === 7)!.merge_window_ms, 1_500, 'a queued window is kept');

    // Once stamped, a read stamps nothing more.
    const before = stamps;
    await lane(1)(1, SEGMENTS);
    assert.equal(stamps, before);

    // A stamp that never takes (segments keep arriving without one): the read fails, so the batch is retried.
    await pool.query('UPDATE queue_segments SET merge_window_ms = NULL WHERE first_seq = 3');
    await assert.rejects(readingStamped(read, async () => 0)(1, SEGMENTS), /a node older than migration 8 is still queueing/);
  } finally {
    await pool.end();
  }
});
