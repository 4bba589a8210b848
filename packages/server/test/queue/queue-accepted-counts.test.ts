/**
 * Accepted counts written by the queue commit (issue 15, item 6): per data set and UTC hour of
 * arrival, in the same transaction as the events, on both queues; a SQLite file older than the
 * counts gets them from the segments it holds.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { SqliteEventQueue } from '../../src/queue/sqlite-event-queue.js';
import { acceptedCounts as sqliteAcceptedCounts, openQueueDatabase } from '../../src/queue/sqlite-queue-store.js';
import { acceptedCounts as postgresAcceptedCounts, PostgresEventQueue } from '../../src/queue/postgres-event-queue.js';
import { createPool, migrate } from '../../src/postgres/database.js';
import type { QueueAppend } from '../../src/queue/event-queue.js';
import { tempDataDir } from '../helpers/server-process.js';
import { freshDatabase, pgOnly } from '../helpers/postgres.js';
import { createLegacyQueueFile } from '../helpers/legacy-queue-file.js';

const H = Date.UTC(2025, 4, 6, 19);
const append = (dataSetId: string, receivedAt: number, n: number, tag: string): QueueAppend => ({
  requestId: `r-${tag}`, keyId: 'key_test', dataSetId, receivedAt, policyVersion: 1, mergeWindowMs: 604_800_000,
  events: Array.from({ length: n }, (_, i) => ({ data_set_id: dataSetId, id: `${tag}-${i}`, timestamp: 1_746_558_000, event_type: 'purchase' })),
  metas: Array.from({ length: n }, () => undefined),
});

/** Appends at once (they share commit groups): two data sets, two hours. */
const appends = () => [
  append('a', H + 10, 3, 'a1'), append('a', H + 3_599_999, 4, 'a2'), append('b', H + 5, 2, 'b1'),
  append('a', H + 3_600_000, 5, 'a3'), append('b', H + 7_200_001, 1, 'b2'),
];

test('SQLite: each commit adds its events per data set and hour', async () => {
  const file = join(tempDataDir('ecapi-accepted-'), 'queue.db');
  const queue = new SqliteEventQueue(file);
  await Promise.all(appends().map((a) => queue.append(a)));
  await queue.append(append('a', H + 20, 6, 'a4'));
  await queue.close();
  const db = openQueueDatabase(file, { readonly: true });
  try {
    assert.deepEqual(sqliteAcceptedCounts(db, 'a', 0), [{ hour: H, name: 'accepted', n: 13 }, { hour: H + 3_600_000, name: 'accepted', n: 5 }]);
    assert.deepEqual(sqliteAcceptedCounts(db, 'b', 0), [{ hour: H, name: 'accepted', n: 2 }, { hour: H + 7_200_000, name: 'accepted', n: 1 }]);
    assert.deepEqual(sqliteAcceptedCounts(db, 'a', H + 3_600_000), [{ hour: H + 3_600_000, name: 'accepted', n: 5 }]);
  } finally {
    db.close();
  }
});

test('SQLite: a queue file older than the counts gets them from its segments, then counts on', async () => {
  const file = join(tempDataDir('ecapi-accepted-old-'), 'queue.db');
  const old = createLegacyQueueFile(file);
  const insert = old.prepare('INSERT INTO queue_segments VALUES (?, ?, ?, ?, ?, ?, 1, ?, NULL)');
  insert.run(1, 2, H + 1, 'a', 'key_test', 'r0', JSON.stringify([{}, {}]));
  insert.run(3, 3, H + 2, 'a', 'key_test', 'r1', JSON.stringify([{}, {}, {}]));
  insert.run(6, 1, H + 3_600_000, 'b', 'key_test', 'r2', JSON.stringify([{}]));
  old.close();
  const before = new Database(file, { readonly: true });
  assert.equal(sqliteAcceptedCounts(before, 'a', 0), null, 'no counts before a writer opened the file');
  before.close();

  const queue = new SqliteEventQueue(file);
  await queue.append(append('a', H + 3, 4, 'new'));
  await queue.close();
  const db = openQueueDatabase(file, { readonly: true });
  try {
    assert.deepEqual(sqliteAcceptedCounts(db, 'a', 0), [{ hour: H, name: 'accepted', n: 9 }]);
    assert.deepEqual(sqliteAcceptedCounts(db, 'b', 0), [{ hour: H + 3_600_000, name: 'accepted', n: 1 }]);
  } finally {
    db.close();
  }
});

test('PostgreSQL: each commit adds its events per data set and hour, from several nodes at once', pgOnly, async () => {
  const url = await freshDatabase('accepted');
  await migrate(url, 'production');
  const pools = [createPool(url, 'production', { max: 2 }), createPool(url, 'production', { max: 2 })];
  try {
    const nodes = pools.map((p) => new PostgresEventQueue(p));
    await Promise.all([...appends().map((a, i) => nodes[i % 2]!.append(a)), ...appends().map((a, i) => nodes[(i + 1) % 2]!.append({ ...a, requestId: `${a.requestId}-again` }))]);
    for (const node of nodes) await node.close();
    assert.deepEqual(await postgresAcceptedCounts(pools[0]!, 'a', 0), [{ hour: H, name: 'accepted', n: 14 }, { hour: H + 3_600_000, name: 'accepted', n: 10 }]);
    assert.deepEqual(await postgresAcceptedCounts(pools[0]!, 'b', 0), [{ hour: H, name: 'accepted', n: 4 }, { hour: H + 7_200_000, name: 'accepted', n: 2 }]);
    assert.deepEqual(await postgresAcceptedCounts(pools[0]!, 'b', H + 3_600_000), [{ hour: H + 7_200_000, name: 'accepted', n: 2 }]);
  } finally {
    for (const p of pools) await p.end();
  }
});
