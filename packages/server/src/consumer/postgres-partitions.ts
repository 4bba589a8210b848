/**
 * The PostgreSQL profile's partition assignment (the embedded one: sqlite-partitions.ts): several
 * `ecapi-ingest worker` processes, on any machines, sharing the PostgreSQL queue. The loop that
 * applies the partitions is the one of the embedded profile (consumer/consumer-loop.ts); this file
 * provides the leases, the pruning and the lag over all partitions.
 *
 * The queue is split into QUEUE_PARTITIONS partitions by data set (postgres/partitions.ts), each
 * with its own consumer offset (`merged-view/pNN`, model/consumer-offsets.ts). Workers divide the partitions between them with leases
 * in `consumer_leases`, on the database's clock:
 * - every RENEW_MS a worker records itself in `consumer_workers`, renews its leases for LEASE_MS,
 *   and counts the live workers; its fair share is ceil(partitions / live workers);
 * - over its share it releases partitions (a newcomer picks them up at its next round); under it,
 *   it claims partitions whose lease expired (FOR UPDATE SKIP LOCKED: two workers never claim the
 *   same one in one round);
 * - a worker that dies stops renewing: its leases and its membership expire after LEASE_MS, and the
 *   others take its partitions over at their next round, within LEASE_MS + RENEW_MS (18 s);
 * - on a clean stop a worker releases its leases at once.
 * A worker applies its partitions concurrently (one lane each in the loop), on its pool's
 * connections: partitions hold different data sets, so their transactions never touch the same rows.
 *
 * Leases only share the work; they are not what keeps a record from being applied twice. That is
 * the batch transaction itself: it locks the partition's offset row and gives up when the offset
 * moved (view-consumer.ts), so even two workers that both believe they own a partition (a paused
 * process whose lease expired) apply each record exactly once in effect, and since a partition's
 * offset only moves past records that were applied, none is skipped.
 *
 * An idle lane costs nothing while its partition gets nothing new (queue-head-watch.ts): the queue's
 * head and the partitions appended since are read once for all lanes, and a lane whose last step
 * found nothing steps again only when its partition got segments. A lane that is applying reads its
 * next batch while the current one's transaction runs (read-ahead-source.ts).
 *
 * Retention: a worker deletes, in its own partitions, the segments that its offset has passed and
 * that are older than the retention, in batches of RETENTION_BATCH rows (a short DELETE by primary
 * key; row locks only, so ingestion never waits for it).
 *
 * The sharded layout (merged-view/postgres-view-layout.ts, `worker --view-layout sharded`): the
 * lease unit is a lane, a queue partition's identity part or one of its record shards, so one data
 * set is applied by S + 1 lanes, on the pools of up to S + 1 workers. A record shard reads its
 * partition's segments and keeps its own keys' records (it moves its offset past the others); each
 * lane commits its batch with its own offset row locked, as a data-set lane does. A partition's
 * queue retention waits for the lowest offset of its lanes, and is run by the worker holding its
 * identity part.
 */
import type { Environment } from '../config.js';
import { DEFAULT_POLL_MS, runConsumerLoop, type PartitionAssignment, type PartitionStepper } from './consumer-loop.js';
import type { PostgresViewStore } from '../merged-view/postgres-view-store.js';
import { readSegments } from '../queue/postgres-event-queue.js';
import { readingStamped, stampLegacyMergeWindowsPostgres } from '../queue/postgres-legacy-windows.js';
import type { ConsumerRunOptions } from './consumer-run-options.js';
import type { SuppressionFilter } from '../lifecycle/lifecycle-backend.js';
import { DB_NOW_MS, type Pool } from '../postgres/database.js';
import { QUEUE_PARTITIONS } from '../postgres/migrations.js';
import { VIEW_CONSUMER, partitionOffsets } from '../model/consumer-offsets.js';
import { fixPostgresViewLayout, laneName, laneOf, MAX_RECORD_SHARDS, viewLanes, type PostgresViewLayout, type ViewLane } from '../merged-view/postgres-view-layout.js';
import { applyIdentityStage } from './identity-stage-applier.js';
import { applyRecordShard } from './record-shard-applier.js';
import { queuedRecordShard } from '../merged-view/record-shard.js';
import { DEFAULT_BATCH_SIZE, ViewConsumer, type ConsumerOptions, type QueueSource } from './view-consumer.js';
import type { QueueRecord } from '../queue/event-queue.js';
import { lagOf, type ConsumerLag } from '../model/consumer-lag.js';
import { QueueHeadWatch, skippingWhileIdle } from './queue-head-watch.js';
import { readingAhead } from './read-ahead-source.js';
import { SharedPartitionReads, type SharedPartitionReadsOptions } from './shared-partition-reads.js';

export const LEASE_MS = 15_000;
/** Record shards per queue partition of a new sharded view, unless `--view-partitions` says. */
export const DEFAULT_RECORD_SHARDS = 2;
export const RENEW_MS = 3_000;
const RETENTION_EVERY_MS = 60_000;
const RETENTION_BATCH = 5_000;

export interface PartitionedConsumerOptions extends ConsumerRunOptions {
  readonly workerId: string;
  readonly env: Environment;
  readonly leaseMs?: number;
  readonly renewMs?: number;
  /** Records carrying a suppressed identifier are dropped before the view (view-applier.ts). */
  readonly suppressions?: SuppressionFilter;
}

/** The partitions this worker holds a lease on, renewed and rebalanced every `renewMs`. */
export class LeasedPartitions implements PartitionAssignment {
  readonly refreshMs: number;
  readonly #pool: Pool;
  readonly #store: PostgresViewStore;
  readonly #options: PartitionedConsumerOptions;
  readonly #leaseMs: number;
  readonly #layout: PostgresViewLayout;
  /** Owned lanes (by lease id) and their steppers (kept while owned, so a lane keeps running). */
  readonly owned = new Map<number, PartitionStepper>();
  /** The queue's head, read once for every lane (at most every half poll interval). */
  readonly #head: QueueHeadWatch;
  /** Sharded layout: per queue partition, one read of its segments for the lanes of it held here. */
  readonly #reads = new Map<number, SharedPartitionReads>();
  /** The counts of windows let go (their partitions' lanes all left this worker). */
  readonly #readsGone = { served: 0, read: 0 };

  constructor(pool: Pool, store: PostgresViewStore, layout: PostgresViewLayout, options: PartitionedConsumerOptions) {
    this.#pool = pool;
    this.#store = store;
    this.#layout = layout;
    this.#options = options;
    this.#leaseMs = options.leaseMs ?? LEASE_MS;
    this.refreshMs = options.renewMs ?? RENEW_MS;
    this.#head = new QueueHeadWatch(async (since) => {
      // One statement, one snapshot: the head and the partitions of the segments below it since the
      // previous read (a range of the primary key: what ~50 ms of appends wrote).
      const { rows } = await pool.query<{ next_seq: string; parts: number[] | null }>(
        `SELECT h.next_seq, CASE WHEN $1::bigint < 0 THEN NULL
           ELSE ARRAY(SELECT DISTINCT part FROM queue_segments WHERE first_seq >= $1::bigint AND first_seq < h.next_seq) END AS parts
         FROM queue_head h WHERE h.id = 1`,
        [since],
      );
      return { head: Number(rows[0]!.next_seq), parts: rows[0]!.parts };
    }, (options.pollMs ?? DEFAULT_POLL_MS) / 2);
  }

  #stepper(lane: ViewLane): PartitionStepper {
    const { suppressions } = this.#options;
    const { part } = lane;
    const options = {
      batchSize: this.#options.batchSize,
      mergeWindowMs: this.#options.mergeWindowMs,
      ...(suppressions ? { suppressions } : {}),
    };
    let reads = this.#reads.get(part);
    if (reads === undefined && this.#layout.kind === 'sharded') {
      reads = sharedPartitionReads(this.#pool, part, this.#layout.shards, options);
      this.#reads.set(part, reads);
    }
    const consumer = laneConsumer(this.#pool, this.#store, lane, options, reads);
    return skippingWhileIdle({ name: laneName(lane), step: () => consumer.step() }, part, this.#head);
  }

  /**
   * A lane whose lease this worker lost: its partition's other lanes here stop waiting for it, and
   * a partition with no lane left here lets its window go (its counts kept for the stop line).
   */
  #forgetLane(lane: ViewLane): void {
    const reads = this.#reads.get(lane.part);
    if (reads === undefined) return;
    reads.forget(lane.consumer);
    for (const lease of this.owned.keys()) if (laneOf(this.#layout, lease).part === lane.part) return;
    this.#reads.delete(lane.part);
    this.#readsGone.served += reads.counts.served;
    this.#readsGone.read += reads.counts.read;
  }

  /** Sharded layout: queue records its lanes got from a shared read, and read from the database (shared-partition-reads.ts). */
  sharedReadCounts(): { queue_records_shared: number; queue_records_read: number } {
    let shared = this.#readsGone.served;
    let read = this.#readsGone.read;
    for (const reads of this.#reads.values()) {
      shared += reads.counts.served;
      read += reads.counts.read;
    }
    return { queue_records_shared: shared, queue_records_read: read };
  }

  /** Sharded layout: the queue partitions this worker holds a shared read for (one per partition with a lane here), ascending; for tests. */
  sharedReadParts(): number[] {
    return [...this.#reads.keys()].sort((a, b) => a - b);
  }

  /** The queue partitions whose identity part (or data-set lane) this worker owns: it prunes their segments. */
  ownedPartitions(): number[] {
    return [...this.owned.keys()].map((lease) => laneOf(this.#layout, lease)).filter((lane) => lane.role !== 'records').map((lane) => lane.part);
  }

  async refresh(): Promise<readonly PartitionStepper[]> {
    const me = this.#options.workerId;
    const pool = this.#pool;
    const leaseMs = this.#leaseMs;
    await pool.query(
      `INSERT INTO consumer_workers (worker_id, host, pid, seen_at) VALUES ($1, $2, $3, ${DB_NOW_MS})
       ON CONFLICT (worker_id) DO UPDATE SET seen_at = excluded.seen_at`,
      [me, me.split(':')[0], process.pid],
    );
    await pool.query(`DELETE FROM consumer_workers WHERE seen_at < ${DB_NOW_MS} - $1::bigint * 4`, [leaseMs]);
    const live = Number(
      (await pool.query<{ n: string }>(`SELECT count(*) AS n FROM consumer_workers WHERE seen_at >= ${DB_NOW_MS} - $1::bigint`, [leaseMs])).rows[0]!.n,
    );
    const share = Math.ceil(viewLanes(this.#layout).length / Math.max(1, live));
    const renewed = (
      await pool.query<{ part: number }>(
        `UPDATE consumer_leases SET expires_at = ${DB_NOW_MS} + $2::bigint WHERE owner = $1 RETURNING part`,
        [me, leaseMs],
      )
    ).rows.map((r) => r.part);
    let mine = new Set(renewed);
    if (mine.size > share) {
      const extra = [...mine].sort((a, b) => b - a).slice(0, mine.size - share);
      await pool.query('UPDATE consumer_leases SET owner = NULL, expires_at = 0 WHERE owner = $1 AND part = ANY($2::integer[])', [me, extra]);
      for (const part of extra) mine.delete(part);
    } else if (mine.size < share) {
      const claimed = (
        await pool.query<{ part: number }>(
          `UPDATE consumer_leases SET owner = $1, expires_at = ${DB_NOW_MS} + $2::bigint
           WHERE part IN (SELECT part FROM consumer_leases WHERE expires_at < ${DB_NOW_MS} ORDER BY part LIMIT $3 FOR UPDATE SKIP LOCKED)
           RETURNING part`,
          [me, leaseMs, share - mine.size],
        )
      ).rows.map((r) => r.part);
      mine = new Set([...mine, ...claimed]);
    }
    for (const lease of [...this.owned.keys()]) {
      if (mine.has(lease)) continue;
      this.owned.delete(lease);
      this.#forgetLane(laneOf(this.#layout, lease));
    }
    for (const lease of mine) if (!this.owned.has(lease)) this.owned.set(lease, this.#stepper(laneOf(this.#layout, lease)));
    return [...this.owned.values()];
  }

  async release(): Promise<void> {
    const me = this.#options.workerId;
    await this.#pool.query('UPDATE consumer_leases SET owner = NULL, expires_at = 0 WHERE owner = $1', [me]).catch(() => undefined);
    await this.#pool.query('DELETE FROM consumer_workers WHERE worker_id = $1', [me]).catch(() => undefined);
  }
}

/**
 * The consumer of one lane (merged-view/postgres-view-layout.ts): its queue source, its store (a
 * part's, with its fence and counter shard, in the sharded layout), its offset row and its applier.
 */
export function laneConsumer(
  pool: Pool,
  store: PostgresViewStore,
  lane: ViewLane,
  options: Omit<ConsumerOptions, 'consumer' | 'applier'>,
  reads?: SharedPartitionReads,
): ViewConsumer {
  return new ViewConsumer(lane.role === 'data-set' ? store : store.forPart({ consumer: lane.consumer, shard: lane.shard }), laneSource(pool, lane, options.mergeWindowMs, reads), {
    ...options,
    consumer: lane.consumer,
    ...(lane.role === 'records' ? { applier: applyRecordShard } : lane.role === 'identities' ? { applier: applyIdentityStage } : {}),
  });
}

/** A queue partition's segments as read by its lanes: segments an older node queued without their merge window stamped first. */
function partitionReader(pool: Pool, part: number, windowOf: (dataSetId: string) => number): (fromSeq: number, limit: number) => Promise<QueueRecord[]> {
  const read = (fromSeq: number, limit: number) => readSegments(pool, { fromSeq, limit, part });
  return readingStamped(read, () => stampLegacyMergeWindowsPostgres(pool, windowOf));
}

/**
 * One read of a partition's segments for its lanes held by one worker (shared-partition-reads.ts),
 * holding at most two record shards' reads (`batchSize` × shards each).
 */
export function sharedPartitionReads(
  pool: Pool,
  part: number,
  shards: number,
  options: { readonly batchSize?: number; readonly mergeWindowMs: (dataSetId: string) => number } & Partial<SharedPartitionReadsOptions>,
): SharedPartitionReads {
  return new SharedPartitionReads(partitionReader(pool, part, options.mergeWindowMs), {
    ...options,
    maxRecords: options.maxRecords ?? 2 * (options.batchSize ?? DEFAULT_BATCH_SIZE) * shards,
  });
}

/**
 * A lane's queue: its partition's segments (through `reads` when given: one read for the
 * partition's lanes in this worker), read ahead; a record shard keeps its own keys' records and
 * moves past the others (it reads `limit` × shards records for a batch of about `limit`). A segment
 * an older node queued without its merge window is stamped before any lane takes it
 * (queue/postgres-legacy-windows.ts `readingStamped`).
 */
function laneSource(pool: Pool, lane: ViewLane, windowOf: (dataSetId: string) => number, reads?: SharedPartitionReads): QueueSource {
  const read = reads !== undefined ? (fromSeq: number, limit: number) => reads.read(lane.consumer, fromSeq, limit) : partitionReader(pool, lane.part, windowOf);
  const source = readingAhead(read);
  if (lane.role !== 'records') return source;
  return {
    read: () => Promise.reject(new Error('a record shard reads with readBatch')),
    async readBatch(fromSeq, limit) {
      const records = await source.read(fromSeq, limit * lane.shards);
      const nextSeq = records.length > 0 ? records[records.length - 1]!.seq + 1 : fromSeq;
      return { records: records.filter((record) => queuedRecordShard(record, lane.shards) === lane.shard), nextSeq };
    },
    close: () => source.close(),
  };
}

/** Deletes, in the partitions this worker owns, the segments every lane of the partition applied that are older than the retention. */
async function pruneOwnedPartitions(pool: Pool, store: PostgresViewStore, parts: Iterable<number>, retentionMs: number): Promise<number> {
  const offsets = partitionOffsets(VIEW_CONSUMER, await store.offsets(`${VIEW_CONSUMER}/`), QUEUE_PARTITIONS);
  let deleted = 0;
  for (const part of parts) {
    const next = offsets[part]!;
    if (next <= 1) continue;
    for (;;) {
      const result = await pool.query(
        `DELETE FROM queue_segments WHERE first_seq IN (
           SELECT first_seq FROM queue_segments WHERE part = $1 AND first_seq + event_count <= $2 AND received_at < $3
           ORDER BY first_seq LIMIT ${RETENTION_BATCH})`,
        [part, next, Date.now() - retentionMs],
      );
      deleted += result.rowCount ?? 0;
      if ((result.rowCount ?? 0) < RETENTION_BATCH) break;
    }
  }
  return deleted;
}

export async function runPartitionedConsumer(pool: Pool, store: PostgresViewStore, options: PartitionedConsumerOptions): Promise<void> {
  const { logger } = options;
  const me = options.workerId;
  const requested: PostgresViewLayout =
    options.viewLayout === 'sharded' ? { kind: 'sharded', shards: options.viewPartitions ?? DEFAULT_RECORD_SHARDS } : { kind: 'data-sets', shards: 0 };
  if (requested.kind === 'sharded' && (!Number.isInteger(requested.shards) || requested.shards < 1 || requested.shards > MAX_RECORD_SHARDS)) {
    throw new Error(`record shards must be 1 to ${MAX_RECORD_SHARDS}`);
  }
  const layout = await fixPostgresViewLayout(pool, requested);
  if ((options.viewLayout !== undefined && layout.kind !== requested.kind) || (layout.kind === 'sharded' && options.viewPartitions !== undefined && layout.shards !== requested.shards)) {
    logger.warn(
      { requested_layout: requested.kind, requested_shards: requested.shards, layout: layout.kind, shards: layout.shards },
      'the view was created with another layout; keeping it (empty the view to change it)',
    );
  }
  // Segments queued before migration 8 get their data set's merge window before this worker applies
  // any (queue/postgres-legacy-windows.ts): one empty index probe once there are none.
  const stamped = await stampLegacyMergeWindowsPostgres(pool, options.mergeWindowMs);
  if (stamped > 0) logger.info({ segments: stamped }, 'merge windows stamped on segments an earlier version queued');
  const leases = new LeasedPartitions(pool, store, layout, options);
  const retentionMs = options.retentionMs ?? 0;
  logger.info({ env: options.env, pid: process.pid, worker: me, layout: layout.kind, ...(layout.kind === 'sharded' ? { shards: layout.shards } : {}) }, 'consumer started');
  try {
    await runConsumerLoop(leases, {
      logger,
      stopped: options.stopped,
      pollMs: options.pollMs,
      onTick: async () => {
        await options.onTick?.();
        await store.heartbeat({ consumer: VIEW_CONSUMER, pid: process.pid, at: Date.now() });
      },
      ...(retentionMs > 0
        ? {
            retention: {
              everyMs: options.retentionEveryMs ?? RETENTION_EVERY_MS,
              run: async () => {
                const deleted = await pruneOwnedPartitions(pool, store, leases.ownedPartitions(), retentionMs);
                if (deleted > 0) logger.info({ deleted_segments: deleted }, 'queue retention');
              },
            },
          }
        : {}),
    });
  } finally {
    await store.heartbeat({ consumer: VIEW_CONSUMER, pid: process.pid, at: 0 }).catch(() => undefined);
    logger.info({ env: options.env, worker: me, ...(layout.kind === 'sharded' ? leases.sharedReadCounts() : {}) }, 'consumer stopped');
  }
}

/**
 * The consumer's lag over all queue partitions (`worker status`, the console, /metrics), from the
 * partitions' offsets (`offsets`: the view store's rows named `merged-view/pNN`, and the record
 * shards' `merged-view/pNN/sK`: the lowest counts; a partition never applied starts at 1): records queued and not yet applied in any partition, and the age of the
 * oldest of them.
 */
export async function partitionedLag(pool: Pool, offsets: ReadonlyMap<string, number>, nowMs: number): Promise<ConsumerLag> {
  const parts = Array.from({ length: QUEUE_PARTITIONS }, (_, p) => p);
  const nexts = partitionOffsets(VIEW_CONSUMER, offsets, QUEUE_PARTITIONS);
  const { rows } = await pool.query<{ last: number; lag: string; oldest: number | null; first_pending: number | null }>(
    `WITH o AS (SELECT * FROM unnest($1::integer[], $2::bigint[]) AS o(part, next_seq)),
          pending AS (SELECT q.first_seq, q.event_count, q.received_at, o.next_seq FROM queue_segments q JOIN o ON q.part = o.part
                      WHERE q.first_seq + q.event_count > o.next_seq)
     SELECT (SELECT next_seq - 1 FROM queue_head WHERE id = 1) AS last,
            COALESCE(SUM(first_seq + event_count - GREATEST(first_seq, next_seq)), 0) AS lag,
            MIN(received_at) AS oldest, MIN(GREATEST(first_seq, next_seq)) AS first_pending
     FROM pending`,
    [parts, nexts],
  );
  const row = rows[0]!;
  const lagRecords = Number(row.lag);
  const nextSeq = row.first_pending ?? row.last + 1;
  const lag = lagOf(nextSeq, { lastSeq: row.last, receivedAt: row.oldest }, nowMs);
  return { ...lag, lag_records: lagRecords };
}
