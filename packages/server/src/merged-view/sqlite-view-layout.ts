/**
 * The embedded view's partitions: P SQLite files, one writer each, so that P consumer threads
 * apply in parallel (SQLite has one writer per file). Partition 0 is `view.db` itself, partition
 * k > 0 is `view-p<k>.db` beside it; a data set lives in partition
 * `model/data-set-partition.ts partitionAmong(data set, P)`. With P = 1 the layout is exactly the
 * single-file one of earlier versions.
 *
 * P is fixed when the view is first consumed, and recorded in view.db (`view_layout`); a view.db
 * that already holds consumed records without that row is an older single-file view (P = 1).
 * Changing P afterwards would strand data sets in the wrong file, so a different requested P is
 * ignored (the caller logs it); to change P, delete the view files: the consumer rebuilds them from
 * the queue (as far as retention kept it).
 */
import type Database from 'better-sqlite3';
import { basename, dirname, join } from 'node:path';
import { VIEW_CONSUMER } from '../model/consumer-offsets.js';

/** Part of VIEW_SCHEMA (sqlite-view-store.ts). */
export const LAYOUT_SCHEMA = `CREATE TABLE IF NOT EXISTS view_layout (id INTEGER PRIMARY KEY CHECK (id = 1), partitions INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS view_sharding (id INTEGER PRIMARY KEY CHECK (id = 1), sharded INTEGER NOT NULL);`;

/**
 * How a view splits its state over files:
 * - `data-sets` (the default): P partitions by data set (view.db, view-p<k>.db), one data set applied by one thread;
 * - `sharded` (consumer/identity-stage-applier.ts): P record shards by record key (view-s<k>.db) and
 *   P identity parts by data set (view.db, view-p<k>.db), so one data set is applied by P + 1 threads.
 * Recorded with the partition count when the view is first consumed (`view_sharding`, absent: data-sets).
 */
export type ViewLayoutKind = 'data-sets' | 'sharded';

export const VIEW_LAYOUT_KINDS: readonly ViewLayoutKind[] = ['data-sets', 'sharded'];

export interface ViewLayout {
  readonly partitions: number;
  readonly kind: ViewLayoutKind;
}

/** Most partitions a view may have. */
export const MAX_VIEW_PARTITIONS = 16;

/** The file of partition `part` of the view whose partition 0 is `viewFile`. */
export function viewPartitionFile(viewFile: string, part: number): string {
  if (part === 0) return viewFile;
  const name = basename(viewFile).replace(/\.db$/, '');
  return join(dirname(viewFile), `${name}-p${part}.db`);
}

/** The file of record shard `shard` of a sharded view (consumer/identity-stage-applier.ts): `view-s<k>.db`. */
export function viewShardFile(viewFile: string, shard: number): string {
  const name = basename(viewFile).replace(/\.db$/, '');
  return join(dirname(viewFile), `${name}-s${shard}.db`);
}

/** The recorded partition count, or null when the view was never consumed with a layout. */
export function recordedViewPartitions(db: Database.Database): number | null {
  const n = db.prepare('SELECT partitions FROM view_layout WHERE id = 1').pluck().get() as number | undefined;
  if (n !== undefined) return n;
  // An older single-file view that was already consumed.
  const offset = db.prepare('SELECT next_seq FROM consumer_offsets WHERE consumer = ?').pluck().get(VIEW_CONSUMER) as number | undefined;
  return offset !== undefined && offset > 1 ? 1 : null;
}

/** The recorded layout, or null when the view was never consumed with one. */
export function recordedViewLayout(db: Database.Database): ViewLayout | null {
  const partitions = recordedViewPartitions(db);
  if (partitions === null) return null;
  // A view.db of an earlier version has no view_sharding table until a writer opens it (schema):
  // a read-only connection (the lifecycle's) may see it first.
  const table = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'view_sharding'").get();
  const sharded = table === undefined ? undefined : (db.prepare('SELECT sharded FROM view_sharding WHERE id = 1').pluck().get() as number | undefined);
  return { partitions, kind: sharded === 1 ? 'sharded' : 'data-sets' };
}

/**
 * The layout of a view (view.db's connection, schema created): the recorded one, else `requested`,
 * recorded now, in one transaction. Several processes may race here; the first wins and all read it.
 */
export function fixViewLayout(db: Database.Database, requested: ViewLayout): ViewLayout {
  db.transaction(() => {
    if (recordedViewLayout(db) !== null) return;
    db.prepare('INSERT OR IGNORE INTO view_layout (id, partitions) VALUES (1, ?)').run(requested.partitions);
    db.prepare('INSERT OR IGNORE INTO view_sharding (id, sharded) VALUES (1, ?)').run(requested.kind === 'sharded' ? 1 : 0);
  }).immediate();
  return recordedViewLayout(db)!;
}

/** Every file of a view with this layout, identity parts (or data-set partitions) first. */
export function viewLayoutFiles(viewFile: string, layout: ViewLayout): { identityParts: string[]; shards: string[] } {
  const identityParts = Array.from({ length: layout.partitions }, (_, p) => viewPartitionFile(viewFile, p));
  const shards = layout.kind === 'sharded' ? Array.from({ length: layout.partitions }, (_, k) => viewShardFile(viewFile, k)) : [];
  return { identityParts, shards };
}
