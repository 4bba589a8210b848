/**
 * The embedded view's partitions: P SQLite files, one writer each, so that P consumer threads
 * apply in parallel (SQLite has one writer per file). Partition 0 is `view.db` itself, partition
 * k > 0 is `view-p<k>.db` beside it; a data set lives in partition
 * `data-set-partition.ts partitionOf(data set, P)`. With P = 1 the layout is exactly the
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
/** consumer/view-consumer.ts VIEW_CONSUMER (not imported: the consumer imports the stores). */
const VIEW_CONSUMER = 'merged-view';

/** Part of VIEW_SCHEMA (sqlite-view-store.ts). */
export const LAYOUT_SCHEMA = 'CREATE TABLE IF NOT EXISTS view_layout (id INTEGER PRIMARY KEY CHECK (id = 1), partitions INTEGER NOT NULL);';

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

/**
 * The partition count of a view (view.db's connection, schema created): the recorded one, else
 * `requested`, recorded now. Several processes may race here; the first insert wins and all read it.
 */
export function fixViewPartitions(db: Database.Database, requested: number): number {
  const recorded = recordedViewPartitions(db);
  const n = recorded ?? requested;
  db.prepare('INSERT OR IGNORE INTO view_layout (id, partitions) VALUES (1, ?)').run(n);
  return db.prepare('SELECT partitions FROM view_layout WHERE id = 1').pluck().get() as number;
}
