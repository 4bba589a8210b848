/**
 * The PostgreSQL profiles of the lifecycle model tests (test/lifecycle/deletion-model.test.ts,
 * retention-model.test.ts), wired in-process as the worker wires them (storage/postgres-storage.ts,
 * consumer/postgres-partitions.ts): the environment's schema dropped and migrated again for each run,
 * a main pool and the queue's pool, the real queue, view store and lifecycle backend, the view's
 * layout recorded (merged-view/postgres-view-layout.ts `fixPostgresViewLayout`, as the worker does
 * when it starts), and one ViewConsumer per lane of the queue partitions of the run's data sets
 * (`laneConsumer`, as the worker builds a lane it leases), reading ahead over its partition's
 * segments under the lane's consumer name. Leases and idle-lane skipping are not exercised: a test
 * steps the lanes itself.
 *
 * Layouts:
 * - `data-sets` (the default): one lane per queue partition; a data set's lane is its partition's.
 * - `{ sharded: S }`: per queue partition, S record shards then the identity part (lanes in that
 *   order, partition after partition in the order of the data sets); a data set's lanes are its
 *   partition's S + 1 (those its PostgresViewEraser holds, lifecycle/postgres-view-eraser.ts). The
 *   runner holds them at one queue position before it deletes (lifecycle/parts-fence.ts, the fence
 *   in each lane's offset row, lifecycle/postgres-fenced-part.ts): `whileHeld` steps the held lanes
 *   while a round runs (test/helpers/sharded-model-parts.ts `stepWhileHeld`).
 */
import type { Environment } from '../../src/config.js';
import { laneConsumer, sharedPartitionReads } from '../../src/consumer/postgres-partitions.js';
import type { ConsumerOptions, StepResult, ViewConsumer } from '../../src/consumer/view-consumer.js';
import { PostgresLifecycleBackend } from '../../src/lifecycle/postgres-lifecycle-backend.js';
import { fixPostgresViewLayout, laneName, partitionLanes, type PostgresViewLayout, type ViewLane } from '../../src/merged-view/postgres-view-layout.js';
import { PostgresViewStore } from '../../src/merged-view/postgres-view-store.js';
import { recordShardOf } from '../../src/merged-view/record-shard.js';
import { createPool, migrate, schemaOf, type Pool } from '../../src/postgres/database.js';
import { queuePartitionOf } from '../../src/postgres/partitions.js';
import { PostgresEventQueue } from '../../src/queue/postgres-event-queue.js';
import { freshDatabase, queryDatabase } from './postgres.js';
import { stepWhileHeld } from './sharded-model-parts.js';

export interface PostgresModelLanes {
  readonly pool: Pool;
  readonly queue: PostgresEventQueue;
  readonly view: PostgresViewStore;
  readonly lifecycle: PostgresLifecycleBackend;
  /** The recorded layout. */
  readonly layout: PostgresViewLayout;
  /** One consumer per lane (above). */
  readonly lanes: readonly ViewConsumer[];
  /** The lanes that apply a data set (its queue partition's). */
  lanesOf(dataSetId: string): number[];
  /** The sharded layout: the lane of the record shard holding a record (the data-set lane otherwise). */
  shardLaneOf(dataSetId: string, recordKey: string): number;
  /**
   * The sharded layout: a data set's record keys whose merged record (written by its record shard)
   * and identity row (`view_record_identities`, written by the identity part) are not both there,
   * each with what is missing. Empty whenever every lane has applied the same queue (the parts apply
   * the same merge decisions, consumer/identity-stage-applier.ts) and every deletion took both; in
   * the data-set layout, empty (no identity rows).
   */
  unpairedRecords(dataSetId: string): Promise<string[]>;
  /** A lane's name in a trace: `p03`, or `p03/s1` and `p03/id` (sharded). */
  laneName(lane: number): string;
  /**
   * Runs `work` (a lifecycle round) while stepping, with `step`, every lane held below its fence
   * (`SELECT fence_seq FROM consumer_offsets`), reporting each step; in the data-set layout, just
   * runs it (nothing is ever held).
   */
  whileHeld<T>(work: () => Promise<T>, step: (lane: number) => Promise<StepResult>, onStep: (lane: number, result: StepResult) => void): Promise<T>;
  /** Closes everything it opened (the caller first closes what it built on `pool`). */
  close(): Promise<void>;
}

/**
 * A database for a property's runs: `url` null creates it (named after `name`), otherwise the
 * environment's schema is dropped; then migrated. Returns the database's URL.
 */
export async function resetModelDatabase(url: string | null, name: string, env: Environment): Promise<string> {
  const at = url ?? (await freshDatabase(name));
  if (url !== null) await queryDatabase(at, `DROP SCHEMA IF EXISTS ${schemaOf(env)} CASCADE`);
  await migrate(at, env);
  return at;
}

/**
 * Opens the components on `url` (just migrated: the layout is recorded here); `options(lane)`: the
 * consumer options of a lane, but its consumer name and applier (the lane's); `layout.sharded`: the
 * record shards per queue partition of the sharded layout (absent: the data-set layout); `layout.hotLinks`:
 * the hot links of the lanes' store, as a worker's `--view-hot-links` (absent or 0: none).
 */
export async function openModelLanes(
  url: string,
  env: Environment,
  dataSets: readonly string[],
  options: (lane: number) => Omit<ConsumerOptions, 'consumer' | 'applier'>,
  layout: { readonly sharded?: number; readonly hotLinks?: number } = {},
): Promise<PostgresModelLanes> {
  const S = layout.sharded;
  const pool = createPool(url, env, { max: S === undefined ? 6 : 10 });
  const queuePool = createPool(url, env, { max: 2, settings: { lock_timeout: '5s', statement_timeout: '30s' } });
  const requested: PostgresViewLayout = S === undefined ? { kind: 'data-sets', shards: 0 } : { kind: 'sharded', shards: S };
  let recorded: PostgresViewLayout;
  try {
    recorded = await fixPostgresViewLayout(pool, requested);
  } catch (error) {
    await queuePool.end();
    await pool.end();
    throw error;
  }
  if (recorded.kind !== requested.kind || recorded.shards !== requested.shards) {
    await queuePool.end();
    await pool.end();
    throw new Error(`the view's layout is ${JSON.stringify(recorded)}, not the one asked for (${JSON.stringify(requested)})`);
  }
  const queue = new PostgresEventQueue(queuePool);
  const view = new PostgresViewStore(pool);
  const lifecycle = new PostgresLifecycleBackend(pool);
  const parts = [...new Set(dataSets.map(queuePartitionOf))];
  // Per partition: its record shards, then its identity part (or its one data-set lane).
  const lanes: ViewLane[] = parts.flatMap((part) => {
    const of = partitionLanes(recorded, part);
    return [...of.filter((lane) => lane.role === 'records'), ...of.filter((lane) => lane.role !== 'records')];
  });
  // The lanes' store as a worker's: one set of hot links shared by its lanes (postgres-hot-links.ts).
  const laneStore = view.withHotLinks(layout.hotLinks ?? 0);
  // The sharded layout's lanes of a partition share one read of it, as a worker's do
  // (shared-partition-reads.ts), with a window of a few records so that it often drops, starts
  // again and serves a lane behind it on its own; no wait: the property steps one lane at a time.
  const reads = new Map(
    recorded.kind === 'sharded'
      ? parts.map((part) => [part, sharedPartitionReads(pool, part, recorded.shards, { mergeWindowMs: options(0).mergeWindowMs, maxRecords: 5, waitMs: 0 })] as const)
      : [],
  );
  const consumers = lanes.map((lane, n) => laneConsumer(pool, laneStore, lane, options(n), reads.get(lane.part)));
  const lanesOf = (ds: string) => lanes.flatMap((lane, n) => (lane.part === queuePartitionOf(ds) ? [n] : []));
  const consumerNames = lanes.map((lane) => lane.consumer);
  return {
    pool,
    queue,
    view,
    lifecycle,
    layout: recorded,
    lanes: consumers,
    lanesOf,
    shardLaneOf(ds, recordKey) {
      const of = lanesOf(ds);
      if (recorded.kind !== 'sharded') return of[0]!;
      const shard = recordShardOf(ds, recordKey, recorded.shards);
      return of.find((n) => lanes[n]!.role === 'records' && lanes[n]!.shard === shard)!;
    },
    async unpairedRecords(ds) {
      if (recorded.kind !== 'sharded') return [];
      const { rows } = await pool.query<{ record_key: string; missing: string }>(
        `SELECT COALESCE(r.record_key, i.record_key) AS record_key, CASE WHEN r.record_key IS NULL THEN 'record' ELSE 'identity row' END AS missing
           FROM (SELECT record_key FROM view_records WHERE data_set_id = $1) r
           FULL JOIN (SELECT record_key FROM view_record_identities WHERE data_set_id = $1) i ON i.record_key = r.record_key
          WHERE r.record_key IS NULL OR i.record_key IS NULL ORDER BY 1`,
        [ds],
      );
      return rows.map((row) => `${row.record_key}: no ${row.missing}`);
    },
    laneName: (n) => laneName(lanes[n]!),
    whileHeld(work, step, onStep) {
      if (recorded.kind !== 'sharded') return work();
      return stepWhileHeld(work, async () => {
        const { rows } = await pool.query<{ consumer: string; next_seq: string; fence_seq: string | null }>(
          'SELECT consumer, next_seq, fence_seq FROM consumer_offsets WHERE consumer = ANY($1::text[])',
          [consumerNames],
        );
        const held = new Set(rows.filter((r) => r.fence_seq !== null && Number(r.next_seq) <= Number(r.fence_seq)).map((r) => r.consumer));
        return consumerNames.flatMap((name, n) => (held.has(name) ? [n] : []));
      }, step, onStep);
    },
    async close() {
      // A lane's read-ahead source keeps nothing but a pending read, which pool.end() waits for.
      await queue.close();
      await lifecycle.close();
      await view.close();
      await queuePool.end();
      await pool.end();
    },
  };
}
