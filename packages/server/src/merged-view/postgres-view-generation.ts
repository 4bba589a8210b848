/**
 * The generation of a data set's merged view on PostgreSQL (`view_generations`, migration 7): a
 * counter that every writer of identifier links other than the data set's consumer lane bumps in
 * the same transaction as its change. Today that is the lifecycle's eraser when it deletes an
 * identity's links (retention, `identities forget`, `events delete`; lifecycle/postgres-view-eraser.ts).
 * A worker keeps a data set's links in memory across batches (postgres-hot-links.ts) and reads
 * this once per batch: when it moved, what the worker remembers may be stale and is dropped.
 *
 * The embedded view's counterpart is view-generation.ts (one counter per view file, since a file
 * has one writer lock). Here a counter per data set: an erasure in one data set leaves every other
 * data set's links held, on every worker. A data set with no row is at generation 0.
 *
 * Hazard: a writer that deletes or changes identifier links and does not call `bump` in its
 * transaction leaves the workers' hot links stale.
 */
import type { Pool, PoolClient } from '../postgres/database.js';

/** Bumps `dataSetId`'s generation, inside the caller's transaction (its row stays locked until it ends). */
export async function bumpViewGeneration(db: PoolClient | Pool, dataSetId: string): Promise<void> {
  await db.query(
    'INSERT INTO view_generations (data_set_id, n) VALUES ($1, 1) ON CONFLICT (data_set_id) DO UPDATE SET n = view_generations.n + 1',
    [dataSetId],
  );
}

/** The generations of `dataSetIds` (0 for a data set never bumped). */
export async function readViewGenerations(db: PoolClient | Pool, dataSetIds: readonly string[]): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const id of dataSetIds) out.set(id, 0);
  if (dataSetIds.length === 0) return out;
  const { rows } = await db.query<{ data_set_id: string; n: string }>('SELECT data_set_id, n FROM view_generations WHERE data_set_id = ANY($1::text[])', [dataSetIds]);
  for (const row of rows) out.set(row.data_set_id, Number(row.n));
  return out;
}
