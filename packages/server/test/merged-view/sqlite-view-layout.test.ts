/**
 * The embedded view's layout (merged-view/sqlite-view-layout.ts): recorded when the view is first
 * consumed, kept afterwards, and a view written by an earlier version read as it is.
 *
 * The fixture (test/fixtures/view-23489c0) is a real view made by main at 23489c0, the version
 * before the sharded layout could be chosen: two data-set partitions (view.db, view-p1.db) that
 * applied the fixture's queue.db (80 events of two data sets, re-sends and shared identifiers).
 * Its files have neither `view_sharding` nor `view_fence`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { viewDbFile, queueDbFile, environmentDir } from '../../src/config.js';
import { SqlitePartitions } from '../../src/consumer/sqlite-partitions.js';
import { SqliteLifecycleBackend } from '../../src/lifecycle/sqlite-lifecycle-backend.js';
import { SqlitePartitionedView } from '../../src/merged-view/partitioned-view-store.js';
import { tempDataDir } from '../helpers/server-process.js';
import { viewSnapshot } from '../helpers/view-snapshot.js';

const FIXTURE = fileURLToPath(new URL('../../../test/fixtures/view-23489c0/', import.meta.url));

/** A data dir holding the fixture's files in the production environment. */
function fixtureDataDir(files: readonly string[]): string {
  const dataDir = tempDataDir('ecapi-layout-');
  mkdirSync(environmentDir(dataDir, 'production'), { recursive: true, mode: 0o700 });
  for (const file of files) copyFileSync(join(FIXTURE, file), join(environmentDir(dataDir, 'production'), file));
  return dataDir;
}

test('a view written by the previous version is read as it is: its layout (2 data-set partitions) kept, its records, identities and counters those this version gives', { timeout: 60_000 }, async () => {
  const dataDir = fixtureDataDir(['queue.db', 'view.db', 'view-p1.db']);
  const viewFile = viewDbFile(dataDir, 'production');

  // The lifecycle looks first, read-only, before any writer opened the old files.
  const backend = new SqliteLifecycleBackend(dataDir, 'production');
  try {
    assert.ok(await backend.viewEraser('ds-a'), 'the lifecycle finds the recorded layout');
    assert.equal(await backend.applied('ds-a', 80), true, 'and the partitions\' offsets');
    assert.ok((await backend.dataSetUsage('ds-b')).records > 10);
  } finally {
    await backend.close();
  }

  const old = new SqlitePartitionedView(viewFile);
  try {
    assert.deepEqual(old.layout(), { partitions: 2, kind: 'data-sets' });
    // A worker started with another layout keeps the recorded one.
    assert.deepEqual(old.fixLayout({ partitions: 4, kind: 'sharded' }), { partitions: 2, kind: 'data-sets' });
    assert.equal(existsSync(join(environmentDir(dataDir, 'production'), 'view-s0.db')), false);
    assert.equal(await old.offset('merged-view'), 81);

    // The same queue applied by this version into a new view of the same layout.
    const fresh = join(tempDataDir('ecapi-layout-fresh-'), 'view.db');
    const freshView = new SqlitePartitionedView(fresh);
    freshView.fixLayout({ partitions: 2, kind: 'data-sets' });
    const partitions = new SqlitePartitions({ queueFile: queueDbFile(dataDir, 'production'), viewFile: fresh, partitions: 2, batchSize: 7, windows: () => [] });
    assert.equal(await partitions.drain(), 80);
    await partitions.release();
    try {
      for (const dataSetId of ['ds-a', 'ds-b']) {
        const want = await viewSnapshot(freshView, dataSetId);
        assert.ok(want.records.some((r) => r.mergedCount > 1), 'the fixture has re-sends');
        assert.deepEqual(await viewSnapshot(old, dataSetId), want, dataSetId);
      }
    } finally {
      await freshView.close();
    }
  } finally {
    await old.close();
  }
});

test('a new view records the layout asked for first: a sharded one is read through its shards and identity parts', { timeout: 60_000 }, async () => {
  const dataDir = fixtureDataDir(['queue.db']);
  const viewFile = viewDbFile(dataDir, 'production');
  const view = new SqlitePartitionedView(viewFile);
  try {
    assert.equal(view.layout(), null);
    assert.deepEqual(view.fixLayout({ partitions: 2, kind: 'sharded' }), { partitions: 2, kind: 'sharded' });
    assert.deepEqual(new SqlitePartitionedView(viewFile).fixLayout({ partitions: 3, kind: 'data-sets' }), { partitions: 2, kind: 'sharded' }, 'the first recorded wins');
    for (const file of ['view-p1.db', 'view-s0.db', 'view-s1.db']) assert.ok(existsSync(join(environmentDir(dataDir, 'production'), file)), file);
    const partitions = new SqlitePartitions({ queueFile: queueDbFile(dataDir, 'production'), viewFile, partitions: 2, batchSize: 7, windows: () => [], sharded: true });
    assert.equal(await partitions.drain(), 160, 'each record applied by its shard and by its identity part');
    await partitions.release();
    // Read as the previous version's view of the same queue reads.
    const old = new SqlitePartitionedView(join(fixtureDataDir(['view.db', 'view-p1.db']), 'production', 'view.db'));
    try {
      for (const dataSetId of ['ds-a', 'ds-b']) assert.deepEqual(await viewSnapshot(view, dataSetId), await viewSnapshot(old, dataSetId), dataSetId);
      assert.equal(await view.offset('merged-view'), 81);
    } finally {
      await old.close();
    }
  } finally {
    await view.close();
  }
});
