/**
 * The generation of an embedded view file: a counter that every writer other than the partition's
 * consumer bumps in the same transaction as its change (the lifecycle's erasers: retention,
 * `identities forget`, `events delete`; lifecycle/sqlite-view-eraser.ts). The consumer keeps hot
 * state across batches (view-hot-state.ts) and reads this once per batch, inside its write
 * transaction: when it moved, what the consumer remembers may be stale and is dropped.
 *
 * A writer that changes identifier links, identity nodes or records of a view file and does not
 * bump this would leave the consumer's hot state stale: every such writer must call `bump` in its
 * write transaction (only when it changed something, so that an idle retention round keeps the
 * state). Part of VIEW_SCHEMA; a view file made before it has no row, read as generation 0.
 */
import type Database from 'better-sqlite3';

export const GENERATION_SCHEMA = 'CREATE TABLE IF NOT EXISTS view_generation (id INTEGER PRIMARY KEY CHECK (id = 1), n INTEGER NOT NULL);';

export const READ_GENERATION_SQL = 'SELECT n FROM view_generation WHERE id = 1';

/** Prepared statements of the generation on a connection that has the schema. */
export function generationStatements(db: Database.Database): { read(): number; bump(): void } {
  const read = db.prepare(READ_GENERATION_SQL).pluck();
  const bump = db.prepare('INSERT INTO view_generation (id, n) VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET n = n + 1');
  return {
    read: () => (read.get() as number | undefined) ?? 0,
    bump: () => void bump.run(),
  };
}
