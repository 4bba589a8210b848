/**
 * The PostgreSQL view's layout (issue 30 point 4; the embedded one: sqlite-view-layout.ts), and the
 * lanes it is applied in.
 *
 * - `data-sets` (the default, and every view made before this table): one lane per queue partition
 *   (16, by data set, postgres/partitions.ts), offset `merged-view/pNN`, applying records,
 *   identities and counters (consumer/view-applier.ts). One data set is one lane.
 * - `sharded` (consumer/identity-stage-applier.ts): per queue partition, one **identity part**
 *   (offset `merged-view/pNN`: links, identity nodes and `view_record_identities` of the
 *   partition's data sets, in queue order) and S **record shards** (offsets `merged-view/pNN/sK`:
 *   the merged records and counters of the keys merged-view/record-shard.ts gives shard K). One data
 *   set is S + 1 lanes, which workers lease like any other (consumer/postgres-partitions.ts), so it
 *   is applied on several connections and, with several workers, on several machines.
 *
 * Fixed when the view is first consumed, in `view_layout`, by the first worker to start (under a
 * table lock, so two workers starting together agree): a database whose view was already consumed
 * without that row is `data-sets`. Recording `sharded` also creates every part's lease row and
 * offset row (next 1), so that the lowest offset of a partition's rows (model/consumer-offsets.ts
 * `partitionOffsets`: lag, queue retention, the lifecycle's `applied`) counts a part that has not
 * stepped yet. Changing it later would strand state in the wrong lanes: a different request is
 * ignored (the caller logs it); to change it, drop the view's tables' rows and offsets.
 *
 * Lease ids (`consumer_leases.part`): the identity part (or data-set lane) of queue partition q is
 * q, as before; record shard K of q is QUEUE_PARTITIONS × (K + 1) + q.
 */
import { inTransaction, type Pool } from '../postgres/database.js';
import { QUEUE_PARTITIONS } from '../postgres/migrations.js';
import { partitionConsumer, shardConsumer, VIEW_CONSUMER } from '../model/consumer-offsets.js';
import type { ViewLayoutKind } from './sqlite-view-layout.js';

export interface PostgresViewLayout {
  readonly kind: ViewLayoutKind;
  /** Record shards per queue partition (sharded); 0 for data-sets. */
  readonly shards: number;
}

/** Most record shards per queue partition. */
export const MAX_RECORD_SHARDS = 16;

/** One lane of the layout: what one lease applies. */
export interface ViewLane {
  /** `consumer_leases.part`. */
  readonly lease: number;
  /** The queue partition it reads. */
  readonly part: number;
  /** data-set: everything; identities: the identity part; records: record shard `shard` of `shards`. */
  readonly role: 'data-set' | 'identities' | 'records';
  readonly shard: number;
  readonly shards: number;
  /** Its offset row. */
  readonly consumer: string;
}

export function laneOf(layout: PostgresViewLayout, lease: number): ViewLane {
  const part = lease % QUEUE_PARTITIONS;
  const level = Math.floor(lease / QUEUE_PARTITIONS);
  if (layout.kind === 'data-sets') return { lease, part, role: 'data-set', shard: 0, shards: 0, consumer: partitionConsumer(VIEW_CONSUMER, part) };
  if (level === 0) return { lease, part, role: 'identities', shard: 0, shards: layout.shards, consumer: partitionConsumer(VIEW_CONSUMER, part) };
  const shard = level - 1;
  return { lease, part, role: 'records', shard, shards: layout.shards, consumer: shardConsumer(VIEW_CONSUMER, part, shard) };
}

/** A lane's name in logs and traces: `p03` (data-set layout), `p03/id` and `p03/s1` (sharded). */
export function laneName(lane: ViewLane): string {
  const part = `p${String(lane.part).padStart(2, '0')}`;
  return lane.role === 'records' ? `${part}/s${lane.shard}` : lane.role === 'identities' ? `${part}/id` : part;
}

/** Every lane of the layout, by lease id. */
export function viewLanes(layout: PostgresViewLayout): ViewLane[] {
  const leases = QUEUE_PARTITIONS * (layout.kind === 'sharded' ? layout.shards + 1 : 1);
  return Array.from({ length: leases }, (_, lease) => laneOf(layout, lease));
}

/** The lanes of one queue partition (its identity part first, then its shards). */
export function partitionLanes(layout: PostgresViewLayout, part: number): ViewLane[] {
  return viewLanes(layout).filter((lane) => lane.part === part);
}

/** The recorded layout, or null before the view is first consumed. */
export async function recordedPostgresViewLayout(pool: Pick<Pool, 'query'>): Promise<PostgresViewLayout | null> {
  const { rows } = await pool.query<{ kind: ViewLayoutKind; shards: number }>('SELECT kind, shards FROM view_layout WHERE id = 1');
  return rows[0] ? { kind: rows[0].kind, shards: rows[0].shards } : null;
}

/** The recorded layout, else `requested`, recorded now (with its lease and offset rows). */
export async function fixPostgresViewLayout(pool: Pool, requested: PostgresViewLayout): Promise<PostgresViewLayout> {
  return inTransaction(pool, async (db) => {
    await db.query('LOCK TABLE view_layout IN EXCLUSIVE MODE');
    const recorded = await recordedPostgresViewLayout(db);
    if (recorded) return recorded;
    const consumed = (
      await db.query<{ consumed: boolean }>(
        `SELECT EXISTS (SELECT 1 FROM consumer_offsets WHERE starts_with(consumer, $1) AND next_seq > 1) OR EXISTS (SELECT 1 FROM view_records) AS consumed`,
        [`${VIEW_CONSUMER}/`],
      )
    ).rows[0]!.consumed;
    const layout: PostgresViewLayout = consumed || requested.kind === 'data-sets' ? { kind: 'data-sets', shards: 0 } : requested;
    await db.query('INSERT INTO view_layout (id, kind, shards) VALUES (1, $1, $2)', [layout.kind, layout.shards]);
    const lanes = viewLanes(layout);
    await db.query('INSERT INTO consumer_leases (part, owner, expires_at) SELECT g, NULL, 0 FROM unnest($1::integer[]) g ON CONFLICT (part) DO NOTHING', [
      lanes.map((lane) => lane.lease),
    ]);
    if (layout.kind === 'sharded') {
      await db.query('INSERT INTO consumer_offsets (consumer, next_seq) SELECT c, 1 FROM unnest($1::text[]) c ON CONFLICT (consumer) DO NOTHING', [
        lanes.map((lane) => lane.consumer),
      ]);
    }
    return layout;
  });
}
