/** The scale-out profile's lifecycle backend: everything in the environment's PostgreSQL schema. */
import type { Pool } from '../postgres/database.js';
import { VIEW_CONSUMER, partitionConsumer } from '../model/consumer-offsets.js';
import { recordedPostgresViewLayout, type PostgresViewLayout } from '../merged-view/postgres-view-layout.js';
import { queuePartitionOf } from '../postgres/partitions.js';
import type { LifecycleBackend, StoreBytes, ViewEraser } from './lifecycle-backend.js';

/** Which store a table of the environment's schema belongs to (others, like rate buckets, are not counted). */
const STORE_OF_TABLE: Record<string, keyof StoreBytes> = {
  queue_segments: 'queue', queue_head: 'queue', queue_accepted: 'queue',
  view_records: 'view', view_record_identities: 'view', view_layout: 'view', identity_nodes: 'view', identity_identifiers: 'view', view_counters: 'view', consumer_offsets: 'view', consumer_heartbeats: 'view',
  data_sets: 'control', signing_keys: 'control', grants: 'control', control_meta: 'control',
  deletion_requests: 'lifecycle', suppressions: 'lifecycle', lifecycle_meta: 'lifecycle',
  ingest_counters: 'ingest_stats',
};
import { PostgresLifecycleStore } from './postgres-lifecycle-store.js';
import { PostgresQueueEraser } from './postgres-queue-eraser.js';
import { PostgresViewEraser } from './postgres-view-eraser.js';

/**
 * The lowest offset of a queue partition's lanes (`name`: its `merged-view/pNN` row; the sharded
 * layout's record shards are `merged-view/pNN/sK`, merged-view/postgres-view-layout.ts).
 */
const PARTITION_OFFSET = (name: string) =>
  `COALESCE((SELECT min(next_seq) FROM consumer_offsets WHERE consumer = ${name} OR starts_with(consumer, ${name} || '/')), 1)`;

export class PostgresLifecycleBackend implements LifecycleBackend {
  readonly store: PostgresLifecycleStore;
  readonly queue: PostgresQueueEraser;
  readonly #view: PostgresViewEraser;

  readonly #pool: Pool;

  constructor(pool: Pool) {
    this.#pool = pool;
    this.store = new PostgresLifecycleStore(pool);
    this.queue = new PostgresQueueEraser(pool);
    this.#view = new PostgresViewEraser(pool);
  }

  /**
   * The data set's queue partition has no segment up to `boundSeq` that its consumer offset has not
   * passed (an idle partition's offset stays where its last segment ended).
   */
  async applied(dataSetId: string, boundSeq: number): Promise<boolean> {
    const part = queuePartitionOf(dataSetId);
    const { rows } = await this.#pool.query<{ pending: boolean }>(
      `SELECT EXISTS (
         SELECT 1 FROM queue_segments
          WHERE part = $1 AND first_seq <= $2
            AND first_seq + event_count > ${PARTITION_OFFSET('$3')}) AS pending`,
      [part, boundSeq, partitionConsumer(VIEW_CONSUMER, part)],
    );
    return !rows[0]!.pending;
  }

  /**
   * The receipt time of the data set's queue partition's first record past its consumer offset: the
   * segment holding the offset, else the next one (two probes of the (part, first_seq) index).
   */
  async appliedThrough(dataSetId: string, nowMs: number): Promise<number> {
    const part = queuePartitionOf(dataSetId);
    const { rows } = await this.#pool.query<{ at: string | null }>(
      `WITH o AS (SELECT ${PARTITION_OFFSET('$2')} AS seq),
            holding AS (SELECT s.first_seq, s.event_count, s.received_at FROM queue_segments s, o
                         WHERE s.part = $1 AND s.first_seq <= o.seq ORDER BY s.first_seq DESC LIMIT 1),
            later AS (SELECT s.received_at FROM queue_segments s, o WHERE s.part = $1 AND s.first_seq > o.seq ORDER BY s.first_seq LIMIT 1)
       SELECT COALESCE((SELECT h.received_at FROM holding h, o WHERE h.first_seq + h.event_count > o.seq), (SELECT received_at FROM later)) AS at`,
      [part, partitionConsumer(VIEW_CONSUMER, part)],
    );
    const at = rows[0]?.at ?? null;
    return at === null ? nowMs : Math.min(nowMs, Number(at));
  }

  async storeBytes(): Promise<StoreBytes> {
    const { rows } = await this.#pool.query<{ relname: string; bytes: string }>(
      `SELECT c.relname, pg_total_relation_size(c.oid) AS bytes FROM pg_class c
        WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'`,
    );
    const sizes = { queue: 0, body_log: 0, view: 0, control: 0, lifecycle: 0, ingest_stats: 0 };
    for (const row of rows) {
      const store = STORE_OF_TABLE[row.relname];
      if (store) sizes[store] += Number(row.bytes);
    }
    return sizes;
  }

  /** The database server's disk is watched with its own monitoring (docs/SECURITY.md). */
  async freeBytes(): Promise<number | null> {
    return null;
  }

  async dataSetUsage(dataSetId: string): Promise<{ records: number; event_bytes: number }> {
    const { rows } = await this.#pool.query<{ records: string; event_bytes: string | null }>(
      'SELECT count(*) AS records, sum(pg_column_size(event)) AS event_bytes FROM view_records WHERE data_set_id = $1',
      [dataSetId],
    );
    return { records: Number(rows[0]!.records), event_bytes: Number(rows[0]!.event_bytes ?? 0) };
  }

  /** The view's layout once recorded (it never changes afterwards). */
  #layout: PostgresViewLayout | null = null;

  async #recordedLayout(): Promise<PostgresViewLayout | null> {
    return (this.#layout ??= await recordedPostgresViewLayout(this.#pool));
  }

  /** In the sharded layout, an eraser of its own per call: it holds the data set's lanes between `hold` and `release`. */
  async viewEraser(dataSetId: string): Promise<ViewEraser> {
    const layout = await this.#recordedLayout();
    if (layout?.kind !== 'sharded') return this.#view;
    return new PostgresViewEraser(this.#pool, { part: queuePartitionOf(dataSetId), layout });
  }

  async releaseStaleHolds(pending: ReadonlySet<number>): Promise<void> {
    const layout = await this.#recordedLayout();
    if (layout?.kind === 'sharded') await PostgresViewEraser.releaseStaleHolds(this.#pool, layout, pending);
  }

  /** Releases the claims (advisory locks) this process holds. */
  async close(): Promise<void> {
    await this.store.close();
  }
}
