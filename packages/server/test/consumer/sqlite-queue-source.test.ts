/**
 * The consumer's reader of the embedded queue (src/consumer/sqlite-queue-source.ts) on every form a
 * segment's events are stored in: a request body inline (a BLOB: a bare event, or an {"events"}
 * wrapper), a JSON array (TEXT: events changed by policy, or rewritten by an erasure with nulls), a
 * body in the body log; and on a file older than the columns a writer adds on open, read before and
 * after a writer migrates it. The source selects `events` as text (sqlite-queue-store.ts
 * SEGMENT_COLUMNS), so non-ASCII bodies are here too.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { SqliteQueueSource } from '../../src/consumer/sqlite-queue-source.js';
import { SqliteEventQueue } from '../../src/queue/sqlite-event-queue.js';
import type { QueueAppend } from '../../src/queue/event-queue.js';
import { tempDataDir } from '../helpers/server-process.js';
import { createLegacyQueueFile } from '../helpers/legacy-queue-file.js';

const eventOf = (id: string, extra: Record<string, unknown> = {}) => ({ data_set_id: 'ds', id, timestamp: 1_700_000_000, event_type: 'purchase', ...extra });
const appendOf = (events: Record<string, unknown>[], rawBody: Buffer | undefined, requestId: string, mergeWindowMs = 604_800_000): QueueAppend => ({
  requestId, keyId: 'key_test', dataSetId: 'ds', receivedAt: 1_700_000_000_000, policyVersion: 1, mergeWindowMs,
  events, metas: events.map(() => undefined), ...(rawBody ? { rawBody } : {}),
});

test('the source reads every stored form of a segment as the events sent, non-ASCII text included', async () => {
  const file = join(tempDataDir('ecapi-source-'), 'queue.db');
  const queue = new SqliteEventQueue(file);
  const bare = eventOf('bare-1', { properties: { city: 'Zürich', note: 'déjà vu 🛒 ₹' } });
  const wrapped = [eventOf('wrap-1', { properties: { name: 'Ærø – 東京' } }), eventOf('wrap-2')];
  const changed = [eventOf('array-1', { properties: { city: 'Kraków' } })]; // no raw body: stored as a JSON array
  const logged = [eventOf('log-1', { ext: { pad: 'ü'.repeat(20_000) } })]; // > 32 KiB: the body log
  try {
    await queue.append(appendOf([bare], Buffer.from(JSON.stringify(bare)), 'r1'));
    await queue.append(appendOf(wrapped, Buffer.from(JSON.stringify({ events: wrapped })), 'r2'));
    await queue.append(appendOf(changed, undefined, 'r3', 3_600_000));
    await queue.append(appendOf(logged, Buffer.from(JSON.stringify({ events: logged })), 'r4'));
  } finally {
    await queue.close();
  }
  const db = new Database(file, { readonly: true });
  const forms = db.prepare('SELECT typeof(events) AS form, body_file FROM queue_segments ORDER BY first_seq').all();
  db.close();
  assert.deepEqual(forms, [
    { form: 'blob', body_file: null },
    { form: 'blob', body_file: null },
    { form: 'text', body_file: null },
    { form: 'blob', body_file: 1 },
  ]);

  const source = new SqliteQueueSource(file);
  try {
    const { records, nextSeq } = await source.readBatch(1, 100);
    assert.deepEqual(records.map((r) => r.event), [bare, ...wrapped, ...changed, ...logged]);
    assert.deepEqual(records.map((r) => [r.seq, r.request_id, r.merge_window_ms]), [
      [1, 'r1', 604_800_000], [2, 'r2', 604_800_000], [3, 'r2', 604_800_000], [4, 'r3', 3_600_000], [5, 'r4', 604_800_000],
    ]);
    assert.equal(nextSeq, 6);
    // From the middle of a segment: the same records as the tail of a whole read.
    assert.deepEqual((await source.readBatch(3, 100)).records.map((r) => r.event), [wrapped[1], ...changed, ...logged]);
  } finally {
    await source.close();
  }
});

test('a queue file older than the writer\'s columns is read before and after a writer adds them', async () => {
  const file = join(tempDataDir('ecapi-source-'), 'queue.db');
  const old = createLegacyQueueFile(file);
  const legacyArray = eventOf('legacy-1', { properties: { city: 'Málaga' } });
  const legacyBody = eventOf('legacy-2');
  old.prepare('INSERT INTO queue_segments VALUES (1, 1, 1700000000000, ?, ?, ?, 1, ?, NULL)').run('ds', 'key_test', 'r0', JSON.stringify([legacyArray]));
  old.prepare('INSERT INTO queue_segments VALUES (2, 1, 1700000000000, ?, ?, ?, 1, ?, NULL)').run('ds', 'key_test', 'r1', Buffer.from(JSON.stringify(legacyBody)));
  old.close();

  // The consumer may open the file before any writer of this version has: it has none of the new columns.
  const source = new SqliteQueueSource(file);
  try {
    const before = await source.readBatch(1, 100);
    assert.deepEqual(before.records.map((r) => r.event), [legacyArray, legacyBody]);
    assert.deepEqual(before.records.map((r) => r.merge_window_ms), [null, null]);
    assert.equal(before.nextSeq, 3);

    // A writer opens it (adds body_file, body_offset, body_length, merge_window_ms) and logs a large body.
    const queue = new SqliteEventQueue(file);
    const big = [eventOf('after-1', { ext: { pad: 'p'.repeat(40_000) } })];
    const small = eventOf('after-2', { properties: { city: 'Zürich' } });
    try {
      await queue.append(appendOf(big, Buffer.from(JSON.stringify({ events: big })), 'r2', 86_400_000));
      await queue.append(appendOf([small], Buffer.from(JSON.stringify(small)), 'r3', 86_400_000));
    } finally {
      await queue.close();
    }
    // The same source, still open: the logged body is read from the log, and the windows are the queued ones.
    const after = await source.readBatch(before.nextSeq, 100);
    assert.deepEqual(after.records.map((r) => r.event), [...big, small]);
    assert.deepEqual(after.records.map((r) => r.merge_window_ms), [86_400_000, 86_400_000]);
    assert.deepEqual((await source.readBatch(1, 100)).records.map((r) => r.event.id), ['legacy-1', 'legacy-2', 'after-1', 'after-2']);
  } finally {
    await source.close();
  }
});
