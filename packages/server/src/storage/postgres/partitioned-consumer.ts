/**
 * Several `ecapi-ingest worker` processes, on any machines, sharing the PostgreSQL queue.
 *
 * The queue is split into QUEUE_PARTITIONS partitions by data set (partitions.ts), each with its
 * own consumer offset (`merged-view/pNN`). Workers divide the partitions between them with leases
 * in `consumer_leases`, on the database's clock:
 * - every RENEW_MS a worker records itself in `consumer_workers`, renews its leases for LEASE_MS,
 *   and counts the live workers; its fair share is ceil(partitions / live workers);
 * - over its share it releases partitions (a newcomer picks them up at its next round); under it,
 *   it claims partitions whose lease expired (FOR UPDATE SKIP LOCKED: two workers never claim the
 *   same one in one round);
 * - a worker that dies stops renewing: its leases and its membership expire after LEASE_MS, and the
 *   others take its partitions over at their next round, within LEASE_MS + RENEW_MS (18 s);
 * - on a clean stop a worker releases its leases at once.
 *
 * Leases only share the work; they are not what keeps a record from being applied twice. That is
 * the batch transaction itself: it locks the partition's offset row and gives up when the offset
 * moved (view-consumer.ts), so even two workers that both believe they own a partition (a paused
 * process whose lease expired) apply each record exactly once in effect, and since a partition's
 * offset only moves past records that were applied, none is skipped.
 *
 * Retention: a worker deletes, in its own partitions, the segments that its offset has passed and
 * that are older than the retention, in batches of RETENTION_BATCH rows (a short DELETE by primary
 * key; row locks only, so ingestion never waits for it).
 */
import type { Environment } from '../../config.js';
import { ViewConsumer } from '../../consumer/view-consumer.js';
import { VIEW_CONSUMER } from '../../consumer/view-consumer.js';
import type { PostgresViewStore } from '../../merged-view/postgres-view-store.js';
import { readSegments } from '../../queue/postgres-event-queue.js';
import type { ConsumerRunOptions } from '../storage.js';
import { DB_NOW_MS, type Pool } from './database.js';
import { QUEUE_PARTITIONS } from './migrations.js';
import { partitionConsumer } from './partitions.js';

export const LEASE_MS = 15_000;
export const RENEW_MS = 3_000;
const RETENTION_EVERY_MS = 60_000;
const RETENTION_BATCH = 5_000;

export interface PartitionedConsumerOptions extends ConsumerRunOptions {
  readonly workerId: string;
  readonly env: Environment;
  readonly leaseMs?: number;
  readonly renewMs?: number;
}

export async function runPartitionedConsumer(pool: Pool, store: PostgresViewStore, options: PartitionedConsumerOptions): Promise<void> {
  const me = options.workerId;
  const leaseMs = options.leaseMs ?? LEASE_MS;
  const renewMs = options.renewMs ?? RENEW_MS;
  const logger = options.logger;
  const owned = new Map<number, ViewConsumer>();
  const consumerOf = (part: number) =>
    new ViewConsumer(
      store,
      { read: (fromSeq, limit) => readSegments(pool, { fromSeq, limit, part }), close: async () => undefined },
      { batchSize: options.batchSize, mergeWindowMs: options.mergeWindowMs, consumer: partitionConsumer(VIEW_CONSUMER, part) },
    );

  const rebalance = async () => {
    await pool.query(
      `INSERT INTO consumer_workers (worker_id, host, pid, seen_at) VALUES ($1, $2, $3, ${DB_NOW_MS})
       ON CONFLICT (worker_id) DO UPDATE SET seen_at = excluded.seen_at`,
      [me, me.split(':')[0], process.pid],
    );
    await pool.query(`DELETE FROM consumer_workers WHERE seen_at < ${DB_NOW_MS} - $1::bigint * 4`, [leaseMs]);
    const live = Number(
      (await pool.query<{ n: string }>(`SELECT count(*) AS n FROM consumer_workers WHERE seen_at >= ${DB_NOW_MS} - $1::bigint`, [leaseMs])).rows[0]!.n,
    );
    const share = Math.ceil(QUEUE_PARTITIONS / Math.max(1, live));
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
    const before = [...owned.keys()].sort((a, b) => a - b).join(',');
    for (const part of owned.keys()) if (!mine.has(part)) owned.delete(part);
    for (const part of mine) if (!owned.has(part)) owned.set(part, consumerOf(part));
    const after = [...owned.keys()].sort((a, b) => a - b).join(',');
    if (before !== after) logger.info({ worker: me, live_workers: live, partitions: after }, 'consumer partitions changed');
  };

  const retention = async () => {
    if (!options.retentionMs || options.retentionMs <= 0) return;
    const offsets = await store.offsets(`${VIEW_CONSUMER}/`);
    let deleted = 0;
    for (const part of owned.keys()) {
      const next = offsets.get(partitionConsumer(VIEW_CONSUMER, part));
      if (next === undefined) continue;
      for (;;) {
        const result = await pool.query(
          `DELETE FROM queue_segments WHERE first_seq IN (
             SELECT first_seq FROM queue_segments WHERE part = $1 AND first_seq + event_count <= $2 AND received_at < $3
             ORDER BY first_seq LIMIT ${RETENTION_BATCH})`,
          [part, next, Date.now() - options.retentionMs],
        );
        deleted += result.rowCount ?? 0;
        if ((result.rowCount ?? 0) < RETENTION_BATCH) break;
      }
    }
    if (deleted > 0) logger.info({ deleted_segments: deleted }, 'queue retention');
  };

  let stop = false;
  let wake: (() => void) | null = null;
  void options.stopped.then(() => {
    stop = true;
    wake?.();
  });
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        wake = null;
        resolve();
      }, ms);
      wake = () => {
        clearTimeout(timer);
        wake = null;
        resolve();
      };
    });

  logger.info({ env: options.env, pid: process.pid, worker: me }, 'consumer started');
  let lastRebalance = 0;
  let lastTick = 0;
  let lastRetention = Date.now();
  let failures = 0;
  const totals = { records: 0, created: 0, merged: 0, discarded: 0 };
  let lastReport = Date.now();
  try {
    while (!stop) {
      const now = Date.now();
      try {
        if (now - lastRebalance >= renewMs) {
          lastRebalance = now;
          await rebalance();
        }
        if (now - lastTick >= 2000) {
          lastTick = now;
          await options.onTick?.();
          await store.heartbeat({ consumer: VIEW_CONSUMER, pid: process.pid, at: Date.now() });
        }
        if (now - lastRetention >= (options.retentionEveryMs ?? RETENTION_EVERY_MS)) {
          lastRetention = now;
          await retention();
        }
        let applied = 0;
        for (const consumer of owned.values()) {
          if (stop) break;
          const result = await consumer.step();
          applied += result.records;
          totals.records += result.records;
          totals.created += result.created;
          totals.merged += result.merged;
          totals.discarded += result.discarded;
        }
        failures = 0;
        if (Date.now() - lastReport >= 10_000 && totals.records > 0) {
          logger.info({ ...totals, worker: me }, 'consumer progress');
          totals.records = totals.created = totals.merged = totals.discarded = 0;
          lastReport = Date.now();
        }
        if (applied === 0) await sleep(options.pollMs ?? 100);
      } catch (error) {
        failures++;
        const delay = Math.min(30_000, 250 * 2 ** Math.min(failures, 7));
        logger.error({ err: { message: (error as Error).message }, retry_in_ms: delay }, 'consumer batch failed; retrying');
        await sleep(delay);
      }
    }
  } finally {
    await pool.query('UPDATE consumer_leases SET owner = NULL, expires_at = 0 WHERE owner = $1', [me]).catch(() => undefined);
    await pool.query('DELETE FROM consumer_workers WHERE worker_id = $1', [me]).catch(() => undefined);
    await store.heartbeat({ consumer: VIEW_CONSUMER, pid: process.pid, at: 0 }).catch(() => undefined);
    logger.info({ env: options.env, worker: me }, 'consumer stopped');
  }
}
