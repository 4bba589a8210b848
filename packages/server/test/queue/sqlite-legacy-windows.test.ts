/**
 * Segments an earlier version queued without their merge window (queue/sqlite-legacy-windows.ts):
 * a writer of this version indexes them on open, the stamp gives each its data set's window in
 * batches, touches no segment that has one, and finds nothing through the partial index afterwards.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { openQueueDatabase, UNSTAMPED_SEGMENTS_INDEX } from '../../src/queue/sqlite-queue-store.js';
import { stampLegacyMergeWindows } from '../../src/queue/sqlite-legacy-windows.js';
import { SqliteEventQueue } from '../../src/queue/sqlite-event-queue.js';
import { tempDataDir } from '../helpers/server-process.js';
import { createLegacyQueueFile } from '../helpers/legacy-queue-file.js';

const LEGACY_ROWS = 12_345; // more than two batches of the stamp

test('segments queued without a window get their data set\'s window once, in batches; segments with one are never touched', async () => {
  const file = join(tempDataDir('ecapi-legacy-windows-'), 'queue.db');
  const old = createLegacyQueueFile(file);
  const insert = old.prepare('INSERT INTO queue_segments VALUES (?, 1, 1700000000000, ?, \'key_test\', ?, 1, ?, NULL)');
  old.transaction(() => {
    for (let seq = 1; seq <= LEGACY_ROWS; seq++) {
      const dataSetId = seq % 3 === 0 ? 'ds-b' : 'ds-a';
      insert.run(seq, dataSetId, `r${seq}`, JSON.stringify([{ data_set_id: dataSetId, id: `e${seq}`, timestamp: 1_700_000_000, event_type: 'purchase' }]));
    }
  })();
  old.close();

  // A writer of this version opens it: the column and the partial index are added.
  const queue = new SqliteEventQueue(file);
  try {
    await queue.append({
      requestId: 'r-new', keyId: 'key_test', dataSetId: 'ds-a', receivedAt: 1_700_000_000_000, policyVersion: 1, mergeWindowMs: 1_500,
      events: [{ data_set_id: 'ds-a', id: 'new', timestamp: 1_700_000_000, event_type: 'purchase' }], metas: [undefined],
    });
  } finally {
    await queue.close();
  }

  const db = openQueueDatabase(file);
  try {
    const find = 'SELECT first_seq FROM queue_segments WHERE merge_window_ms IS NULL ORDER BY first_seq LIMIT 5000';
    const plan = (db.prepare(`EXPLAIN QUERY PLAN ${find}`).all() as { detail: string }[]).map((r) => r.detail).join('\n');
    assert.match(plan, new RegExp(`USING (COVERING )?INDEX ${UNSTAMPED_SEGMENTS_INDEX}\\b`), `the partial index finds them:\n${plan}`);

    const windows = new Map([['ds-a', 3_600_000], ['ds-b', 86_400_000]]);
    assert.equal(stampLegacyMergeWindows(db, (ds) => windows.get(ds)!), LEGACY_ROWS);
    const byWindow = db.prepare('SELECT data_set_id, merge_window_ms AS w, COUNT(*) AS n FROM queue_segments GROUP BY 1, 2 ORDER BY 1, 2').all();
    assert.deepEqual(byWindow, [
      { data_set_id: 'ds-a', w: 1_500, n: 1 },
      { data_set_id: 'ds-a', w: 3_600_000, n: LEGACY_ROWS - Math.floor(LEGACY_ROWS / 3) },
      { data_set_id: 'ds-b', w: 86_400_000, n: Math.floor(LEGACY_ROWS / 3) },
    ]);
    assert.equal(db.prepare(`SELECT COUNT(*) FROM queue_segments INDEXED BY ${UNSTAMPED_SEGMENTS_INDEX} WHERE merge_window_ms IS NULL`).pluck().get(), 0, 'the index is empty');

    // Once stamped, a changed policy changes nothing: the decision is the queue's.
    windows.set('ds-a', 60_000);
    assert.equal(stampLegacyMergeWindows(db, (ds) => windows.get(ds)!), 0);
    assert.equal(db.prepare('SELECT COUNT(*) FROM queue_segments WHERE merge_window_ms = 60000').pluck().get(), 0);
  } finally {
    db.close();
  }
});
