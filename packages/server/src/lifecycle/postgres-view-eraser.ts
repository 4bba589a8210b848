/**
 * Deletions in the PostgreSQL merged view (retention, a person's data, one event), with the rules
 * of the embedded one (sqlite-view-eraser.ts): short transactions of at most `limit` rows, an
 * identity deleted with its last record, counters kept. Row locks only: a consumer batch waits only
 * if it touches the same rows (a record being deleted), for one short transaction.
 *
 * Space: deleted rows are dead tuples until (auto)vacuum marks their space free; later inserts
 * reuse it, so the tables stop growing once retention deletes as much as comes in. After a person's
 * deletion, `clearOldCopies` runs VACUUM on the view's tables (issue 29): the dead row versions leave
 * the tables' visible space now; their bytes stay in the data files until the space is reused, and
 * in the server's WAL, archives and backups until those expire (docs/SECURITY.md).
 *
 * `events delete` of a record whose identity keeps others drops the links only that record carried
 * (its identifiers linked to the identity that no remaining record of the identity carries, and the
 * identity's links of replaceable kinds, `cid:` and `ifa:`, that none carries: an earlier version of
 * the record may have brought them before a re-send replaced them; lifecycle-backend.ts
 * isReplaceableIdentifier), in the
 * transaction that deletes it, which first locks the data set's lanes' offset rows as a person's
 * deletion does: no batch can give a remaining record one of those identifiers in between. The
 * identity's records are read through the data set's rows (no index from an identity to its records).
 *
 * Counts (issue 29): each transaction that deletes for a request adds to its tally in the same
 * transaction (postgres-lifecycle-store.ts addPgTally), so they are exact across takeovers.
 *
 * The sharded layout (merged-view/postgres-view-layout.ts). A record's identity key is in the
 * identity part's `view_record_identities` row (its own is NULL): every query reads
 * `COALESCE(r.identity_key, ri.identity_key)` and a deleted record's identity row goes in the same
 * transaction, so a record and its identity are still deleted atomically. What the transaction
 * cannot give is one queue position: the data set's identity part and record shards are lanes at
 * different offsets (consumer/identity-stage-applier.ts, "Lifecycle"). So the eraser of a sharded
 * view holds them at one position first (`hold`, parts-fence.ts over the lanes' offset rows,
 * postgres-fenced-part.ts), as the embedded one does. With several workers, holds of one queue
 * partition exclude each other with a session advisory lock (`HOLD_LOCK`) taken on a connection
 * of its own from `hold` to `release`: a retention round that finds it taken skips the data set
 * (PartsHeldError), a request waits for it. Fences a killed worker (or an attempt cut off) left are
 * released at the next lifecycle round of any worker (`releaseStaleHolds`) unless their holder is a
 * pending request or a live worker holds the partition's lock. A request's attempt keeps the lock
 * until it ends (`detach`, called by the runner whatever the outcome), so a session lock never
 * outlives the attempt that took it.
 */
import { inTransaction, type Pool, type PoolClient } from '../postgres/database.js';
import { erasedRecordEntry, erasedRecordOf, identifiersOfStoredEvent, isReplaceableIdentifier, zeroCounts, type ErasedCounts, type IdentityToErase, type OldCopiesOptions, type ViewEraser, type ViewTally } from './lifecycle-backend.js';
import { addPgTally, readPgTally } from './postgres-lifecycle-store.js';
import { holdPartsTogether, PartsHeldError, releaseParts } from './parts-fence.js';
import { PostgresFencedPart } from './postgres-fenced-part.js';
import { partitionLanes, type PostgresViewLayout } from '../merged-view/postgres-view-layout.js';
import { partitionConsumer, queuePartitionOfConsumer, VIEW_CONSUMER } from '../model/consumer-offsets.js';
import { queuePartitionOf } from '../postgres/partitions.js';
import { bumpViewGeneration } from '../merged-view/postgres-view-generation.js';

interface RecordIdentityRow {
  record_key: string;
  identity_key: string | null;
}

/** The advisory lock (key pair) of the holds of one queue partition. */
const HOLD_LOCK = "hashtext(current_schema() || ':view_hold')";

/** A merged record and its identity key (from the identity part's row in the sharded layout). */
const RECORDS_WITH_IDENTITY =
  'view_records r LEFT JOIN view_record_identities ri ON ri.data_set_id = r.data_set_id AND ri.record_key = r.record_key';
const IDENTITY_OF_RECORD = 'COALESCE(r.identity_key, ri.identity_key)';
/** Records retention deletes ($1 data set, $2 cutoff). */
const EXPIRED = `r.data_set_id = $1 AND r.last_received_at < $2 AND COALESCE((r.event::jsonb ->> 'timestamp')::numeric, 0) * 1000 + 1000 < $2`;

/** The sharded layout's parts of one queue partition, as the eraser holds them. */
export interface HeldPartition {
  readonly part: number;
  readonly layout: PostgresViewLayout;
}

/** VACUUM of `tables` on a connection of its own, without the pool's statement timeout (a large table takes long). */
export async function vacuum(pool: Pool, tables: readonly string[]): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('SET statement_timeout = 0');
    await client.query(`VACUUM ${tables.join(', ')}`);
  } finally {
    await client.query('RESET statement_timeout').catch(() => undefined);
    client.release();
  }
}

async function rootOf(db: PoolClient | Pool, dataSetId: string, key: string): Promise<string | null> {
  const { rows } = await db.query<{ identity_key: string; parent: string | null }>(
    'SELECT identity_key, parent FROM identity_nodes WHERE data_set_id = $1 AND identity_key = $2',
    [dataSetId, key],
  );
  return rows[0] ? (rows[0].parent ?? rows[0].identity_key) : null;
}

async function treeOf(db: PoolClient | Pool, dataSetId: string, root: string): Promise<string[]> {
  const { rows } = await db.query<{ identity_key: string }>('SELECT identity_key FROM identity_nodes WHERE data_set_id = $1 AND parent = $2', [dataSetId, root]);
  return [root, ...rows.map((r) => r.identity_key)];
}

async function dropIdentity(db: PoolClient, dataSetId: string, root: string, counts: ErasedCounts): Promise<void> {
  const keys = await treeOf(db, dataSetId, root);
  const links = (await db.query('DELETE FROM identity_identifiers WHERE data_set_id = $1 AND identity_key = ANY($2::text[])', [dataSetId, keys])).rowCount ?? 0;
  // In the same transaction: the workers' hot links of this data set are stale from its commit on.
  if (links > 0) await bumpViewGeneration(db, dataSetId);
  counts.links += links;
  counts.identities += (await db.query('DELETE FROM identity_nodes WHERE data_set_id = $1 AND identity_key = ANY($2::text[])', [dataSetId, keys])).rowCount ?? 0;
}

async function dropRecord(db: PoolClient, dataSetId: string, row: RecordIdentityRow, counts: ErasedCounts, sharded: boolean): Promise<void> {
  counts.records += (await db.query('DELETE FROM view_records WHERE data_set_id = $1 AND record_key = $2', [dataSetId, row.record_key])).rowCount ?? 0;
  if (sharded) await db.query('DELETE FROM view_record_identities WHERE data_set_id = $1 AND record_key = $2', [dataSetId, row.record_key]);
  if (row.identity_key === null) return;
  const root = await rootOf(db, dataSetId, row.identity_key);
  if (root === null) return;
  const { rows } = await db.query<{ event_count: number }>(
    'UPDATE identity_nodes SET event_count = event_count - 1 WHERE data_set_id = $1 AND identity_key = $2 RETURNING event_count',
    [dataSetId, root],
  );
  if (rows[0] && rows[0].event_count <= 0) await dropIdentity(db, dataSetId, root, counts);
}

/** Records of an identity read per query when looking for the identifiers they carry. */
const IDENTITY_EVENTS_PAGE = 500;

/**
 * `events delete`, after the record went (same transaction): the links of its identity (if it is
 * still there) to `identifiers` (the record's), and its links of replaceable kinds (the older values
 * a re-send may have replaced in the record), that no remaining record of the identity carries.
 */
async function dropLinksOnlyIn(db: PoolClient, dataSetId: string, identityKey: string, identifiers: readonly string[], counts: ErasedCounts): Promise<void> {
  const root = await rootOf(db, dataSetId, identityKey);
  if (root === null) return; // gone with its last record, links and all
  const keys = await treeOf(db, dataSetId, root);
  const own = new Set(identifiers);
  const { rows: links } = await db.query<{ identifier: string; identity_key: string }>(
    'SELECT identifier, identity_key FROM identity_identifiers WHERE data_set_id = $1 AND identity_key = ANY($2::text[])',
    [dataSetId, keys],
  );
  const linked = links.filter((l) => own.has(l.identifier) || isReplaceableIdentifier(l.identifier));
  if (linked.length === 0) return;
  const left = new Map(linked.map((l) => [l.identifier, l.identity_key]));
  for (let after = 0; left.size > 0; ) {
    const { rows } = await db.query<{ first_seq: string; event: string }>(
      `SELECT r.first_seq, r.event FROM ${RECORDS_WITH_IDENTITY}
        WHERE r.data_set_id = $1 AND ${IDENTITY_OF_RECORD} = ANY($2::text[]) AND r.first_seq > $3 ORDER BY r.first_seq LIMIT $4`,
      [dataSetId, keys, after, IDENTITY_EVENTS_PAGE],
    );
    for (const row of rows) for (const identifier of identifiersOfStoredEvent(row.event)) left.delete(identifier);
    if (rows.length < IDENTITY_EVENTS_PAGE) break;
    after = Number(rows[rows.length - 1]!.first_seq);
  }
  if (left.size === 0) return;
  const { rows: gone } = await db.query<{ identity_key: string }>(
    'DELETE FROM identity_identifiers WHERE data_set_id = $1 AND identifier = ANY($2::text[]) RETURNING identity_key',
    [dataSetId, [...left.keys()]],
  );
  if (gone.length === 0) return;
  // Each link from its node's identifier count and from the root's (which counts its absorbed nodes').
  const less = new Map<string, number>();
  for (const { identity_key: key } of gone) {
    less.set(key, (less.get(key) ?? 0) + 1);
    if (key !== root) less.set(root, (less.get(root) ?? 0) + 1);
  }
  await db.query(
    `UPDATE identity_nodes n SET identifier_count = n.identifier_count - u.n FROM unnest($2::text[], $3::int[]) AS u(identity_key, n)
      WHERE n.data_set_id = $1 AND n.identity_key = u.identity_key`,
    [dataSetId, [...less.keys()], [...less.values()]],
  );
  // In the same transaction: the workers' hot links of this data set are stale from its commit on.
  await bumpViewGeneration(db, dataSetId);
  counts.links += gone.length;
}

export class PostgresViewEraser implements ViewEraser {
  readonly #pool: Pool;
  /** The sharded layout: the queue partition whose lanes this eraser holds; null: the data-set layout (nothing to hold). */
  readonly #held: { readonly part: number; readonly lanes: readonly PostgresFencedPart[] } | null;
  /** The connection holding HOLD_LOCK from `hold` to `release`. */
  #lock: PoolClient | null = null;

  constructor(pool: Pool, sharded: HeldPartition | null = null) {
    this.#pool = pool;
    this.#held = sharded && {
      part: sharded.part,
      lanes: partitionLanes(sharded.layout, sharded.part).map((lane) => new PostgresFencedPart(pool, lane.consumer)),
    };
    if (this.#held === null) {
      // Nothing to hold in the data-set layout: one lane applies a data set's records and identities.
      this.hold = undefined;
      this.release = undefined;
      this.detach = undefined;
      this.hasExpired = undefined;
    }
  }

  get #sharded(): boolean {
    return this.#held !== null;
  }

  /** Holds the partition's lanes at one queue position (see the top): HOLD_LOCK first, then the fences. */
  hold?: (holder: number, wait: () => Promise<void>) => Promise<void> = async (holder, wait) => {
    const held = this.#held!;
    if (this.#lock === null) {
      const client = await this.#pool.connect();
      try {
        for (;;) {
          const { rows } = await client.query<{ locked: boolean }>(`SELECT pg_try_advisory_lock(${HOLD_LOCK}, $1::int) AS locked`, [held.part]);
          if (rows[0]!.locked) break;
          if (holder === 0) throw new PartsHeldError(0); // a retention round: another worker is deleting here
          await wait();
        }
      } catch (error) {
        client.release();
        throw error;
      }
      this.#lock = client;
    }
    try {
      await holdPartsTogether(held.lanes, holder, wait);
    } catch (error) {
      // The fences are another request's (PartsHeldError): leave them. A retention round's own go
      // (a request's stay for its next attempt, and the lock goes with `detach`).
      if (!(error instanceof PartsHeldError) && holder === 0) await releaseParts(held.lanes).catch(() => undefined);
      if (error instanceof PartsHeldError || holder === 0) await this.#unlock();
      throw error;
    }
  };

  /** The lock goes, the fences stay (a request's attempt ends; see lifecycle-backend.ts). */
  detach?: () => Promise<void> = () => this.#unlock();

  /** Lets the lanes go, if this eraser holds them (a hold that failed to take the lock holds nothing). */
  release?: () => Promise<void> = async () => {
    if (this.#lock === null) return;
    try {
      await releaseParts(this.#held!.lanes);
    } finally {
      await this.#unlock();
    }
  };

  async #unlock(): Promise<void> {
    const client = this.#lock;
    if (client === null) return;
    this.#lock = null;
    try {
      await client.query(`SELECT pg_advisory_unlock(${HOLD_LOCK}, $1::int)`, [this.#held!.part]);
      client.release();
    } catch (error) {
      client.release(error as Error); // a broken session: its locks went with it
    }
  }

  /** Whether retention has anything to delete (asked before holding). */
  hasExpired?: (dataSetId: string, cutoffMs: number) => Promise<boolean> = async (dataSetId, cutoffMs) => {
    const { rows } = await this.#pool.query<{ any: boolean }>(`SELECT EXISTS (SELECT 1 FROM view_records r WHERE ${EXPIRED}) AS any`, [dataSetId, cutoffMs]);
    return rows[0]!.any;
  };

  /**
   * Fences a killed worker left (see the top): those of a request still pending stay; the others go
   * where no live worker holds the partition's HOLD_LOCK.
   */
  static async releaseStaleHolds(pool: Pool, layout: PostgresViewLayout, pending: ReadonlySet<number>): Promise<void> {
    const { rows } = await pool.query<{ consumer: string; fence_holder: string }>('SELECT consumer, fence_holder FROM consumer_offsets WHERE fence_seq IS NOT NULL');
    const parts = new Set<number>();
    for (const row of rows) {
      if (pending.has(Number(row.fence_holder))) continue;
      const part = queuePartitionOfConsumer(VIEW_CONSUMER, row.consumer);
      if (part !== null) parts.add(part);
    }
    for (const part of parts) {
      const client = await pool.connect();
      try {
        if (!(await client.query<{ locked: boolean }>(`SELECT pg_try_advisory_lock(${HOLD_LOCK}, $1::int) AS locked`, [part])).rows[0]!.locked) continue;
        try {
          const lanes = partitionLanes(layout, part).map((lane) => lane.consumer);
          await client.query(
            'UPDATE consumer_offsets SET fence_seq = NULL, fence_holder = NULL WHERE consumer = ANY($1::text[]) AND NOT (fence_holder = ANY($2::bigint[]))',
            [lanes, [...pending]],
          );
        } finally {
          await client.query(`SELECT pg_advisory_unlock(${HOLD_LOCK}, $1::int)`, [part]);
        }
      } finally {
        client.release();
      }
    }
  }

  async findIdentity(dataSetId: string, target: { identifier: string } | { identityKey: string }): Promise<IdentityToErase | null> {
    let start: string | undefined;
    if ('identifier' in target) {
      const { rows } = await this.#pool.query<{ identity_key: string }>(
        'SELECT identity_key FROM identity_identifiers WHERE data_set_id = $1 AND identifier = $2',
        [dataSetId, target.identifier],
      );
      start = rows[0]?.identity_key;
    } else start = target.identityKey;
    if (start === undefined) return null;
    const root = await rootOf(this.#pool, dataSetId, start);
    if (root === null) return null;
    const keys = await treeOf(this.#pool, dataSetId, root);
    const { rows } = await this.#pool.query<{ identifier: string }>(
      'SELECT identifier FROM identity_identifiers WHERE data_set_id = $1 AND identity_key = ANY($2::text[]) ORDER BY identifier',
      [dataSetId, keys],
    );
    return { root, keys, identifiers: rows.map((r) => r.identifier) };
  }

  async expire(dataSetId: string, cutoffMs: number, limit: number): Promise<ErasedCounts & { heldMs: number }> {
    const counts = zeroCounts();
    const started = performance.now();
    await inTransaction(this.#pool, async (db) => {
      // SKIP LOCKED: a record a consumer batch is updating right now is left for the next round.
      const { rows } = await db.query<RecordIdentityRow>(
        `SELECT r.record_key, ${IDENTITY_OF_RECORD} AS identity_key FROM ${RECORDS_WITH_IDENTITY}
          WHERE ${EXPIRED} ORDER BY r.last_received_at LIMIT $3 FOR UPDATE OF r SKIP LOCKED`,
        [dataSetId, cutoffMs, limit],
      );
      for (const row of rows) await dropRecord(db, dataSetId, row, counts, this.#sharded);
    });
    // Row locks only, held from the SELECT … FOR UPDATE to the commit.
    return { ...counts, heldMs: performance.now() - started };
  }

  async deleteRecord(requestId: number, dataSetId: string, recordKey: string, boundSeq: number): Promise<void> {
    await inTransaction(this.#pool, async (db) => {
      // The data set's lanes wait for this transaction (a batch in flight commits first; offset rows
      // before any view row, in one order, as deleteIdentityRecords): no batch gives a remaining
      // record of the identity an identifier whose link goes below.
      const lane = partitionConsumer(VIEW_CONSUMER, queuePartitionOf(dataSetId));
      await db.query(`SELECT 1 FROM consumer_offsets WHERE consumer = $1 OR starts_with(consumer, $1 || '/') ORDER BY consumer FOR UPDATE`, [lane]);
      const { rows } = await db.query<RecordIdentityRow & { first_seq: string; last_seq: string; event_id: string | null; event: string }>(
        `SELECT r.record_key, ${IDENTITY_OF_RECORD} AS identity_key, r.first_seq, r.last_seq, r.event_id, r.event FROM ${RECORDS_WITH_IDENTITY}
          WHERE r.data_set_id = $1 AND r.record_key = $2 FOR UPDATE OF r`,
        [dataSetId, recordKey],
      );
      const row = rows[0];
      if (!row || Number(row.first_seq) > boundSeq) return; // first queued after the request: not covered
      const counts = zeroCounts();
      await dropRecord(db, dataSetId, row, counts, this.#sharded);
      if (row.identity_key !== null) await dropLinksOnlyIn(db, dataSetId, row.identity_key, identifiersOfStoredEvent(row.event), counts);
      await addPgTally(db, requestId, {
        view_records: counts.records,
        identities: counts.identities,
        identifier_links: counts.links,
        ...(row.event_id !== null
          ? { max_seq: Number(row.last_seq), straddlers: [erasedRecordEntry({ eventId: row.event_id, lastSeq: Number(row.last_seq) })] }
          : {}),
      });
    });
  }

  /** The cursor is first_seq (unique per record), read through the (data_set_id, first_seq) index up to the bound. */
  async deleteIdentityRecords(
    requestId: number,
    dataSetId: string,
    identity: { root: string; keys: ReadonlySet<string> },
    boundSeq: number,
    after: number,
    limit: number,
  ): Promise<{ next: number | null; deletedEventIds: string[] }> {
    return inTransaction(this.#pool, async (db) => {
      if (after === 0) {
        // First page: the data set's lanes wait for this transaction, and a batch in flight commits
        // before it, so every batch that applied under the suppression list as it was before the
        // request's suppression is visible to this scan, and every later batch takes its lane's row
        // after the suppression was stored and applies under it (consumer/view-consumer.ts). Offset
        // rows first, in one order: a batch locks its own row before any view row, so this cannot
        // deadlock with one.
        const lane = partitionConsumer(VIEW_CONSUMER, queuePartitionOf(dataSetId));
        await db.query(`SELECT 1 FROM consumer_offsets WHERE consumer = $1 OR starts_with(consumer, $1 || '/') ORDER BY consumer FOR UPDATE`, [lane]);
      }
      const { rows } = await db.query<{ first_seq: string | null; n: string; gone: { last_seq: string; event_id: string | null; record_key: string }[] | null }>(
        `WITH page AS (SELECT r.record_key, ${IDENTITY_OF_RECORD} AS identity_key, r.first_seq FROM ${RECORDS_WITH_IDENTITY}
                        WHERE r.data_set_id = $1 AND r.first_seq > $2 AND r.first_seq <= $5 ORDER BY r.first_seq LIMIT $3),
              gone AS (DELETE FROM view_records v USING page p WHERE v.data_set_id = $1 AND v.record_key = p.record_key AND p.identity_key = ANY($4::text[])
                       RETURNING v.last_seq, v.event_id, v.record_key),
              gone_identities AS (DELETE FROM view_record_identities i USING gone g WHERE i.data_set_id = $1 AND i.record_key = g.record_key)
         SELECT (SELECT max(first_seq) FROM page) AS first_seq, (SELECT count(*) FROM page) AS n,
                (SELECT json_agg(json_build_object('last_seq', last_seq, 'event_id', event_id, 'record_key', record_key)) FROM gone) AS gone`,
        [dataSetId, after, limit, [...identity.keys], boundSeq],
      );
      const row = rows[0]!;
      const gone = row.gone ?? [];
      const erased = gone.filter((g) => g.event_id !== null);
      if (gone.length > 0) {
        await db.query('UPDATE identity_nodes SET event_count = event_count - $3 WHERE data_set_id = $1 AND identity_key = $2', [dataSetId, identity.root, gone.length]);
        await addPgTally(db, requestId, {
          view_records: gone.length,
          max_seq: Math.max(0, ...erased.map((g) => Number(g.last_seq))),
          straddlers: erased.map((g) => erasedRecordEntry({ eventId: g.event_id!, lastSeq: Number(g.last_seq) })),
        });
      }
      const deletedEventIds = gone.filter((g) => g.record_key.startsWith('id:')).map((g) => g.record_key.slice(3));
      return { next: Number(row.n) < limit || row.first_seq === null ? null : Number(row.first_seq), deletedEventIds };
    });
  }

  async deleteIdentity(requestId: number, dataSetId: string, root: string): Promise<void> {
    await inTransaction(this.#pool, async (db) => {
      const { rows } = await db.query<{ event_count: number }>('SELECT event_count FROM identity_nodes WHERE data_set_id = $1 AND identity_key = $2 FOR UPDATE', [dataSetId, root]);
      // Records first queued after the request keep the identity (and its links) alive.
      if (!rows[0] || rows[0].event_count > 0) return;
      const counts = zeroCounts();
      await dropIdentity(db, dataSetId, root, counts);
      await addPgTally(db, requestId, { identities: counts.identities, identifier_links: counts.links });
    });
  }

  async tally(requestId: number): Promise<ViewTally> {
    const t = await readPgTally(this.#pool, requestId);
    return { records: t.view_records, identities: t.identities, links: t.identifier_links, maxSeq: t.max_seq, erased: t.straddlers.map(erasedRecordOf) };
  }

  /** The tally is replaced by the final counts (settle): nothing to clear here. */
  async clearTally(): Promise<void> {}

  /** Every eraser of this database VACUUMs the same tables. */
  readonly oldCopiesScope = 'postgres view tables';

  /** A VACUUM of the view's tables; with `scrub: false` (a retention round between two), nothing: autovacuum's. */
  async clearOldCopies(options: OldCopiesOptions = {}): Promise<boolean> {
    if (options.scrub === false) return true;
    await vacuum(this.#pool, ['view_records', 'view_record_identities', 'identity_nodes', 'identity_identifiers']);
    return true;
  }
}
