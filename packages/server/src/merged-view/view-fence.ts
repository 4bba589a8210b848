/**
 * The fence of an embedded view file: the last queue position the file's consumer may apply, or
 * none. Part of the sharded layout's lifecycle (consumer/identity-stage-applier.ts "Lifecycle"):
 * a deletion there touches several files (a record's shard, its data set's identity part), each
 * applied by its own consumer at its own queue offset, so before it deletes, every part is held at
 * one queue position (lifecycle/parts-fence.ts), and the deletion sees exactly the view one
 * applier would have at that position.
 *
 * Invariants:
 * - The fence is written by another connection (the lifecycle's eraser) in a write transaction of
 *   the file, and the consumer reads it inside its own write transaction (consumer/view-consumer.ts),
 *   so a batch committed after a fence was set never ends past it: there is no window in which a
 *   batch that read "no fence" commits after the fence is in place.
 * - The fence lives in the file, so it outlasts a crash of the worker: a part held at a position
 *   stays there until the lifecycle releases it (it does after the deletion; the next attempt of a
 *   request that was cut off holds the parts again at the same position). It names its holder, so
 *   that a restarted lifecycle releases the fences of a retention round or of a request that is no
 *   longer pending (lifecycle-runner.ts) and keeps those of a request it will carry on.
 * - A fence never moves a part back: it only stops it. Part of VIEW_SCHEMA; a file made before it
 *   gets the table from its eraser or its next open (CREATE IF NOT EXISTS), and reads "no fence".
 */
import type Database from 'better-sqlite3';

/** `holder`: the deletion request holding the parts (0: a retention round). */
export const FENCE_SCHEMA = 'CREATE TABLE IF NOT EXISTS view_fence (id INTEGER PRIMARY KEY CHECK (id = 1), up_to_seq INTEGER NOT NULL, holder INTEGER NOT NULL);';

export interface FenceStatements {
  /** The last queue position the consumer may apply, or null: no fence. */
  read(): number | null;
  /** Who set the fence, or null: no fence. */
  holder(): number | null;
  set(upToSeq: number, holder: number): void;
  clear(): void;
}

/** Prepared statements of the fence on a connection that has the schema. */
export function fenceStatements(db: Database.Database): FenceStatements {
  const read = db.prepare('SELECT up_to_seq FROM view_fence WHERE id = 1').pluck();
  const holder = db.prepare('SELECT holder FROM view_fence WHERE id = 1').pluck();
  const set = db.prepare(
    'INSERT INTO view_fence (id, up_to_seq, holder) VALUES (1, ?, ?) ON CONFLICT (id) DO UPDATE SET up_to_seq = excluded.up_to_seq, holder = excluded.holder',
  );
  const clear = db.prepare('DELETE FROM view_fence WHERE id = 1');
  return {
    read: () => (read.get() as number | undefined) ?? null,
    holder: () => (holder.get() as number | undefined) ?? null,
    set: (upToSeq, by) => void set.run(upToSeq, by),
    clear: () => void clear.run(),
  };
}
