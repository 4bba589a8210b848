/**
 * Which consumer workers the PostgreSQL view has and which lanes each holds, as `worker status`
 * shows them (the embedded profile has one consumer, which holds every partition).
 *
 * Read from the assignment's own tables (consumer/postgres-partitions.ts writes them): a worker's row
 * in `consumer_workers` (renewed every few seconds, removed on a clean stop, and by the other
 * workers once it is four leases old) and the leases it holds in `consumer_leases`. A lease counts as
 * held while it has not expired on the database's clock, the clock every lease is taken on, so a
 * reading does not depend on the reader's clock. A lane of the recorded layout that no unexpired
 * lease holds is listed apart: nobody applies it until a worker claims it (a worker that died leaves
 * its lanes so until its leases expire, at most 15 s).
 *
 * Nothing here is secret: worker ids are `<host>:<pid>:<random>`.
 */
import { DB_NOW_MS, type Pool } from '../postgres/database.js';
import { laneName, laneOf, recordedPostgresViewLayout, viewLanes } from './postgres-view-layout.js';

export interface ConsumerWorker {
  /** `<host>:<pid>:<random>`, as its log's `consumer started` line names it. */
  readonly worker: string;
  readonly host: string;
  readonly pid: number;
  /** When it last renewed its membership, epoch ms on the database's clock. */
  readonly seenAt: number;
  /** How long ago that was, ms, on the database's clock. */
  readonly seenAgoMs: number;
  /** The lanes whose unexpired lease it holds, by name (`p03`, `p03/id`, `p03/s1`), in lease order. */
  readonly lanes: readonly string[];
}

export interface ConsumerWorkers {
  /** Every worker with a membership row, the most recently seen first. */
  readonly workers: readonly ConsumerWorker[];
  /** The layout's lanes no unexpired lease holds, in lease order (all of them before the view is first consumed: no layout yet). */
  readonly unheldLanes: readonly string[];
}

export async function consumerWorkers(pool: Pick<Pool, 'query'>): Promise<ConsumerWorkers> {
  const [layout, members, leases] = await Promise.all([
    recordedPostgresViewLayout(pool),
    pool.query<{ worker_id: string; host: string; pid: number; seen_at: string; ago: string }>(
      `SELECT worker_id, host, pid, seen_at, ${DB_NOW_MS} - seen_at AS ago FROM consumer_workers ORDER BY seen_at DESC, worker_id`,
    ),
    pool.query<{ part: number; owner: string }>(`SELECT part, owner FROM consumer_leases WHERE owner IS NOT NULL AND expires_at > ${DB_NOW_MS} ORDER BY part`),
  ]);
  // Before the first worker records a layout, its lanes are the default layout's (data-sets).
  const layoutNow = layout ?? { kind: 'data-sets' as const, shards: 0 };
  const lanes = viewLanes(layoutNow);
  const known = new Set(lanes.map((lane) => lane.lease));
  const held = new Map<string, string[]>();
  const heldLeases = new Set<number>();
  for (const { part, owner } of leases.rows) {
    // A lease row outside the recorded layout is a leftover (a reset view): nothing applies it.
    if (!known.has(part)) continue;
    heldLeases.add(part);
    let names = held.get(owner);
    if (!names) held.set(owner, (names = []));
    names.push(laneName(laneOf(layoutNow, part)));
  }
  return {
    workers: members.rows.map((row) => ({
      worker: row.worker_id,
      host: row.host,
      pid: row.pid,
      seenAt: Number(row.seen_at),
      seenAgoMs: Math.max(0, Number(row.ago)),
      lanes: held.get(row.worker_id) ?? [],
    })),
    unheldLanes: lanes.filter((lane) => !heldLeases.has(lane.lease)).map(laneName),
  };
}
