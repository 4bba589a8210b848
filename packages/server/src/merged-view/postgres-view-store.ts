/**
 * The asynchronous side's storage on PostgreSQL: merged records, identities, view counters,
 * consumer offsets and heartbeats (ViewStore), and ingest outcome counters (IngestStatsStore).
 * Same tables and semantics as sqlite-view-store.ts; every bulk operation of a batch is one
 * statement over arrays (unnest), so a consumer batch costs a handful of round trips.
 *
 * Several consumers may run at once (`worker` on several machines): `offset()` inside a
 * transaction locks the consumer's offset row (SELECT ... FOR UPDATE), so of two consumers that
 * read the same offset, the second waits for the first to commit, sees the moved offset, and gives
 * up its batch (view-consumer.ts). A batch is applied exactly once in effect, whoever runs it.
 *
 * The sharded layout (postgres-view-layout.ts): a lane's store is `forPart(part)`, whose
 * transactions know the lane's offset row (its fence, merged-view/view-fence.ts, read under the
 * row's lock) and its record shard (the counters' `shard` column: shards of one data set commit
 * concurrently and must not meet on a row; reads sum them). The identity part writes
 * `view_record_identities`; a record's identity key is read from there when its own is NULL
 * (`RECORD_COLUMNS`), so reads are the same in both layouts.
 */
import type { CounterRow } from '../model/hourly-counters.js';
import type { JsonObject } from './merge.js';
import {
  pairKey,
  type ConsumerHeartbeat,
  type DataSetCounterDelta,
  type IdentityNode,
  type IdentityView,
  type IngestStatsStore,
  type MergedRecord,
  type RecordIdentity,
  type ViewLayoutInfo,
  type ViewStore,
  type ViewTransaction,
} from './view-store.js';
import { recordedPostgresViewLayout } from './postgres-view-layout.js';
import { consumerWorkers, type ConsumerWorkers } from './postgres-consumer-workers.js';
import { QUEUE_PARTITIONS } from '../postgres/migrations.js';
import { inTransaction, type Pool, type PoolClient } from '../postgres/database.js';
import { nodeOf, recordOf, type NodeRow, type RecordRow as SharedRecordRow } from './view-rows.js';
import { newHotBatch, PostgresHotLinks, type HotBatch } from './postgres-hot-links.js';
import type { HotStats } from './view-hot-state.js';


/**
 * The parent each `from` of a batch of moves ends at when the moves are applied one after another
 * (a → b then b → c takes a's children to c), without the moves that end where they started.
 */
export function finalParents(moves: readonly { dataSetId: string; from: string; to: string }[]): { dataSetId: string; from: string; to: string }[] {
  const final = new Map<string, { dataSetId: string; from: string; to: string }>();
  for (const move of moves) {
    // Everything that currently ends at `move.from` now ends at `move.to`, and so does `move.from` itself.
    for (const entry of final.values()) if (entry.dataSetId === move.dataSetId && entry.to === move.from) entry.to = move.to;
    const key = pairKey(move.dataSetId, move.from);
    if (!final.has(key)) final.set(key, { ...move });
  }
  return [...final.values()].filter((m) => m.from !== m.to);
}

const counterRows = (rows: { hour: number; name: string; n: number }[]): CounterRow[] =>
  rows.map((r) => ({ hour: Number(r.hour), name: r.name, n: Number(r.n) }));

/** A lane of the sharded layout as its store sees it: its offset row (fence) and its record shard (counters). */
export interface PostgresViewPart {
  readonly consumer: string;
  readonly shard: number;
}

/**
 * A merged record's columns, its identity key from the identity part's row when its own is NULL (the
 * sharded layout; `r` view_records, `ri` view_record_identities, joined on the record).
 */
const RECORD_COLUMNS = `r.data_set_id, r.record_key, r.event_id, r.first_seq, r.last_seq, r.first_received_at, r.last_received_at, r.merged_count,
  COALESCE(r.identity_key, ri.identity_key) AS identity_key, r.measurement_only, r.event`;
const WITH_RECORD_IDENTITY = 'LEFT JOIN view_record_identities ri ON ri.data_set_id = r.data_set_id AND ri.record_key = r.record_key';

/**
 * A batch transaction on `db`. With hot links (`hot`), `batch` records what they need: the lane and
 * offset read under the row lock, whether the batch wrote, the links and offset it wrote.
 */
function transactionOn(db: PoolClient, part: PostgresViewPart | null, hot: PostgresHotLinks | null = null, batch: HotBatch = newHotBatch()): ViewTransaction {
  // The lane's fence as read with its offset row locked (offset() comes first in a batch).
  let fence: number | null = null;
  return {
    async offset(consumer) {
      await db.query('INSERT INTO consumer_offsets (consumer, next_seq) VALUES ($1, 1) ON CONFLICT (consumer) DO NOTHING', [consumer]);
      const { rows } = await db.query<{ next_seq: number; fence_seq: number | null }>(
        'SELECT next_seq, fence_seq FROM consumer_offsets WHERE consumer = $1 FOR UPDATE',
        [consumer],
      );
      if (part !== null && consumer === part.consumer) fence = rows[0]!.fence_seq === null ? null : Number(rows[0]!.fence_seq);
      if (batch.lane === null) {
        batch.lane = consumer;
        batch.nextSeq = Number(rows[0]!.next_seq);
      }
      return rows[0]!.next_seq;
    },
    ...(part !== null ? { fence: async () => fence } : {}),
    async loadRecordIdentities(refs) {
      const out = new Map<string, RecordIdentity>();
      if (refs.length === 0) return out;
      const { rows } = await db.query<{ data_set_id: string; record_key: string; first_received_at: string; identity_key: string | null }>(
        `SELECT i.* FROM view_record_identities i JOIN unnest($1::text[], $2::text[]) AS k(ds, rk) ON i.data_set_id = k.ds AND i.record_key = k.rk`,
        [refs.map((r) => r.dataSetId), refs.map((r) => r.recordKey)],
      );
      for (const row of rows) {
        out.set(pairKey(row.data_set_id, row.record_key), {
          dataSetId: row.data_set_id,
          recordKey: row.record_key,
          firstReceivedAt: Number(row.first_received_at),
          identityKey: row.identity_key,
        });
      }
      return out;
    },
    async writeRecordIdentities(rows) {
      if (rows.length === 0) return;
      batch.wrote = true;
      await db.query(
        `INSERT INTO view_record_identities (data_set_id, record_key, first_received_at, identity_key)
         SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[])
         ON CONFLICT (data_set_id, record_key) DO UPDATE SET first_received_at = excluded.first_received_at, identity_key = excluded.identity_key`,
        [rows.map((r) => r.dataSetId), rows.map((r) => r.recordKey), rows.map((r) => r.firstReceivedAt), rows.map((r) => r.identityKey)],
      );
    },
    async setOffset(consumer, nextSeq) {
      batch.wrote = true;
      if (consumer === batch.lane) batch.committedSeq = nextSeq;
      await db.query(
        'INSERT INTO consumer_offsets (consumer, next_seq) VALUES ($1, $2) ON CONFLICT (consumer) DO UPDATE SET next_seq = excluded.next_seq',
        [consumer, nextSeq],
      );
    },
    async loadRecords(refs) {
      const out = new Map<string, MergedRecord>();
      if (refs.length === 0) return out;
      const { rows } = await db.query<SharedRecordRow>(
        `SELECT r.* FROM view_records r JOIN unnest($1::text[], $2::text[]) AS k(ds, rk) ON r.data_set_id = k.ds AND r.record_key = k.rk`,
        [refs.map((r) => r.dataSetId), refs.map((r) => r.recordKey)],
      );
      for (const row of rows) out.set(pairKey(row.data_set_id, row.record_key), recordOf(row));
      return out;
    },
    async loadIdentifierLinks(asked) {
      const out = new Map<string, string>();
      // The hot links answer while the batch wrote nothing yet (its reads are the committed state).
      const pairs = hot !== null && batch.lane !== null && !batch.wrote ? await hot.answer(db, batch, asked, out) : asked;
      if (pairs.length === 0) return out;
      const { rows } = await db.query<{ data_set_id: string; identifier: string; identity_key: string }>(
        `SELECT i.data_set_id, i.identifier, i.identity_key FROM identity_identifiers i
         JOIN unnest($1::text[], $2::text[]) AS k(ds, id) ON i.data_set_id = k.ds AND i.identifier = k.id`,
        [pairs.map((p) => p.dataSetId), pairs.map((p) => p.identifier)],
      );
      for (const row of rows) out.set(pairKey(row.data_set_id, row.identifier), row.identity_key);
      return out;
    },
    async loadIdentities(pairs) {
      const out = new Map<string, IdentityNode>();
      if (pairs.length === 0) return out;
      const { rows } = await db.query<NodeRow>(
        // FOR UPDATE: the batch writes event_count back as an absolute value; without the row lock a
        // deletion's or retention's decrement committed meanwhile was lost (issue 29).
        `SELECT n.* FROM identity_nodes n JOIN unnest($1::text[], $2::text[]) AS k(ds, ik) ON n.data_set_id = k.ds AND n.identity_key = k.ik FOR UPDATE OF n`,
        [pairs.map((p) => p.dataSetId), pairs.map((p) => p.identityKey)],
      );
      for (const row of rows) out.set(pairKey(row.data_set_id, row.identity_key), nodeOf(row));
      return out;
    },
    async writeRecords(records) {
      if (records.length === 0) return;
      batch.wrote = true;
      await db.query(
        `INSERT INTO view_records (data_set_id, record_key, event_id, first_seq, last_seq, first_received_at, last_received_at,
           merged_count, identity_key, measurement_only, event)
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[],
           $8::integer[], $9::text[], $10::boolean[],
           (SELECT array_agg(e ORDER BY i) FROM json_array_elements_text($11::json) WITH ORDINALITY AS t(e, i)))
         ON CONFLICT (data_set_id, record_key) DO UPDATE SET
           event_id = excluded.event_id, first_seq = excluded.first_seq, last_seq = excluded.last_seq,
           first_received_at = excluded.first_received_at, last_received_at = excluded.last_received_at,
           merged_count = excluded.merged_count, identity_key = excluded.identity_key,
           measurement_only = excluded.measurement_only, event = excluded.event`,
        [
          records.map((r) => r.dataSetId),
          records.map((r) => r.recordKey),
          records.map((r) => r.eventId),
          records.map((r) => r.firstSeq),
          records.map((r) => r.lastSeq),
          records.map((r) => r.firstReceivedAt),
          records.map((r) => r.lastReceivedAt),
          records.map((r) => r.mergedCount),
          records.map((r) => r.identityKey),
          records.map((r) => r.measurementOnly),
          // The events' text as one JSON array of strings, not a text[]: the driver writes an array
          // parameter by escaping every element with two regular expressions; JSON.stringify of the
          // strings is native (the worker's CPU per 1 KB event fell by 10-20 µs, issue 30's seventh round).
          JSON.stringify(records.map((r) => JSON.stringify(r.event))),
        ],
      );
    },
    async writeIdentities(nodes) {
      if (nodes.length === 0) return;
      batch.wrote = true;
      await db.query(
        `INSERT INTO identity_nodes (data_set_id, identity_key, parent, created_seq, event_count, identifier_count)
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::integer[], $6::integer[])
         ON CONFLICT (data_set_id, identity_key) DO UPDATE SET parent = excluded.parent, created_seq = excluded.created_seq,
           event_count = excluded.event_count, identifier_count = excluded.identifier_count`,
        [
          nodes.map((n) => n.dataSetId),
          nodes.map((n) => n.identityKey),
          nodes.map((n) => n.parent),
          nodes.map((n) => n.createdSeq),
          nodes.map((n) => n.eventCount),
          nodes.map((n) => n.identifierCount),
        ],
      );
    },
    async reparentIdentities(moves) {
      // The moves apply in order (a later move may start from the survivor of an earlier one), and
      // a node's final parent depends only on its parent before the batch: fold each chain here,
      // then move every node to its final parent in one statement.
      const final = finalParents(moves);
      if (final.length === 0) return;
      batch.wrote = true;
      await db.query(
        `UPDATE identity_nodes n SET parent = m.to_key FROM unnest($1::text[], $2::text[], $3::text[]) AS m(ds, from_key, to_key)
         WHERE n.data_set_id = m.ds AND n.parent = m.from_key`,
        [final.map((m) => m.dataSetId), final.map((m) => m.from), final.map((m) => m.to)],
      );
    },
    async linkIdentifiers(links) {
      if (links.length === 0) return;
      batch.wrote = true;
      if (hot !== null) for (const l of links) batch.links.push(l);
      await db.query(
        `INSERT INTO identity_identifiers (data_set_id, identifier, identity_key)
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
         ON CONFLICT (data_set_id, identifier) DO UPDATE SET identity_key = excluded.identity_key`,
        [links.map((l) => l.dataSetId), links.map((l) => l.identifier), links.map((l) => l.identityKey)],
      );
    },
    async addCounters(deltas) {
      const nonZero = deltas.filter((d) => d.n !== 0);
      if (nonZero.length === 0) return;
      batch.wrote = true;
      const params = [nonZero.map((d) => d.dataSetId), nonZero.map((d) => d.hour), nonZero.map((d) => d.name), nonZero.map((d) => d.n), part?.shard ?? 0];
      await db.query(
        `INSERT INTO view_counters (data_set_id, hour, name, n, shard)
         SELECT *, $5::integer FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[])
         ON CONFLICT (data_set_id, hour, name, shard) DO UPDATE SET n = view_counters.n + excluded.n`,
        params,
      );
      // A counter brought back to zero disappears, as in the embedded store (by a negative delta,
      // or, for a value sum with negative values, by a positive one).
      {
        await db.query(
          `DELETE FROM view_counters c USING unnest($1::text[], $2::bigint[], $3::text[]) AS k(ds, hour, name)
           WHERE c.data_set_id = k.ds AND c.hour = k.hour AND c.name = k.name AND c.shard = $4 AND c.n = 0`,
          [...params.slice(0, 3), params[4]],
        );
      }
    },
  };
}

export class PostgresViewStore implements ViewStore {
  readonly #pool: Pool;
  readonly #part: PostgresViewPart | null;
  /** A worker's hot links (postgres-hot-links.ts), shared by the stores of its lanes; null for readers. */
  readonly #hot: PostgresHotLinks | null;

  constructor(pool: Pool, part: PostgresViewPart | null = null, hot: PostgresHotLinks | null = null) {
    this.#pool = pool;
    this.#part = part;
    this.#hot = hot;
  }

  /** The store as one lane of the sharded layout uses it (its fence, its counters' shard), with this store's hot links. */
  forPart(part: PostgresViewPart): PostgresViewStore {
    return new PostgresViewStore(this.#pool, part, this.#hot);
  }

  /**
   * The store a worker's consumer uses: the same, with identifier links kept in memory up to
   * `maxLinks` (postgres-hot-links.ts; 0: none). `tableOptions`: tests only.
   */
  withHotLinks(maxLinks: number, tableOptions: { maxProbe?: number } = {}): PostgresViewStore {
    return new PostgresViewStore(this.#pool, this.#part, maxLinks > 0 ? new PostgresHotLinks(maxLinks, tableOptions) : null);
  }

  /** Lookups the hot links answered and passed on, links held, full loads (tests; null without hot links). */
  hotStats(): HotStats | null {
    return this.#hot?.state.stats() ?? null;
  }

  async transaction<T>(work: (tx: ViewTransaction) => Promise<T>): Promise<T> {
    const hot = this.#hot;
    if (hot === null) return inTransaction(this.#pool, (db) => work(transactionOn(db, this.#part)));
    const batch = newHotBatch();
    const result = await inTransaction(this.#pool, (db) => work(transactionOn(db, this.#part, hot, batch)));
    hot.committed(batch); // only after COMMIT: a batch that threw (rolled back) adds nothing
    return result;
  }

  /** The lane's fence (a cheap look before it reads the queue; the batch reads it again under the row lock). */
  async fence(): Promise<number | null> {
    if (this.#part === null) return null;
    const { rows } = await this.#pool.query<{ fence_seq: string | null }>('SELECT fence_seq FROM consumer_offsets WHERE consumer = $1', [this.#part.consumer]);
    return rows[0]?.fence_seq == null ? null : Number(rows[0].fence_seq);
  }

  async layout(): Promise<ViewLayoutInfo | null> {
    const layout = await recordedPostgresViewLayout(this.#pool);
    return layout && { kind: layout.kind, partitions: layout.kind === 'sharded' ? layout.shards : QUEUE_PARTITIONS };
  }

  workers(): Promise<ConsumerWorkers> {
    return consumerWorkers(this.#pool);
  }

  async offset(consumer: string): Promise<number> {
    const { rows } = await this.#pool.query<{ next_seq: number }>('SELECT next_seq FROM consumer_offsets WHERE consumer = $1', [consumer]);
    return rows[0]?.next_seq ?? 1;
  }

  /** Every consumer's offset whose name starts with `prefix`. */
  async offsets(prefix: string): Promise<Map<string, number>> {
    const { rows } = await this.#pool.query<{ consumer: string; next_seq: number }>(
      'SELECT consumer, next_seq FROM consumer_offsets WHERE starts_with(consumer, $1)',
      [prefix],
    );
    return new Map(rows.map((r) => [r.consumer, r.next_seq]));
  }

  async getRecord(dataSetId: string, recordKey: string): Promise<MergedRecord | null> {
    const { rows } = await this.#pool.query<SharedRecordRow>(
      `SELECT ${RECORD_COLUMNS} FROM view_records r ${WITH_RECORD_IDENTITY} WHERE r.data_set_id = $1 AND r.record_key = $2`,
      [dataSetId, recordKey],
    );
    return rows[0] ? recordOf(rows[0]) : null;
  }

  async resolveIdentity(dataSetId: string, identityKey: string): Promise<string | null> {
    const { rows } = await this.#pool.query<NodeRow>('SELECT * FROM identity_nodes WHERE data_set_id = $1 AND identity_key = $2', [dataSetId, identityKey]);
    if (!rows[0]) return null;
    return rows[0].parent ?? rows[0].identity_key;
  }

  async identityOfIdentifier(dataSetId: string, identifier: string): Promise<string | null> {
    const { rows } = await this.#pool.query<{ identity_key: string }>(
      'SELECT identity_key FROM identity_identifiers WHERE data_set_id = $1 AND identifier = $2',
      [dataSetId, identifier],
    );
    return rows[0]?.identity_key ?? null;
  }

  async getIdentity(dataSetId: string, identityKey: string): Promise<IdentityView | null> {
    return inTransaction(
      this.#pool,
      async (db) => {
        const asked = (await db.query<NodeRow>('SELECT * FROM identity_nodes WHERE data_set_id = $1 AND identity_key = $2', [dataSetId, identityKey])).rows[0];
        if (!asked) return null;
        const rootKey = asked.parent ?? asked.identity_key;
        const root = (await db.query<NodeRow>('SELECT * FROM identity_nodes WHERE data_set_id = $1 AND identity_key = $2', [dataSetId, rootKey])).rows[0] ?? asked;
        const absorbed = (
          await db.query<{ identity_key: string }>(
            'SELECT identity_key FROM identity_nodes WHERE data_set_id = $1 AND parent = $2 ORDER BY identity_key COLLATE "C"',
            [dataSetId, rootKey],
          )
        ).rows.map((r) => r.identity_key);
        const identifiers = (
          await db.query<{ identifier: string }>(
            'SELECT identifier FROM identity_identifiers WHERE data_set_id = $1 AND identity_key = ANY($2::text[])',
            [dataSetId, [rootKey, ...absorbed]],
          )
        ).rows.map((r) => r.identifier);
        identifiers.sort();
        return { requestedKey: identityKey, identityKey: rootKey, dataSetId, eventCount: root.event_count, identifiers, absorbedKeys: absorbed };
      },
      'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY',
    );
  }

  async exportRecords(dataSetId: string, sinceMs: number, onPage: (records: MergedRecord[]) => void | Promise<void>): Promise<void> {
    let after = -1;
    for (;;) {
      const { rows } = await this.#pool.query<SharedRecordRow>(
        `SELECT ${RECORD_COLUMNS} FROM view_records r ${WITH_RECORD_IDENTITY}
          WHERE r.data_set_id = $1 AND r.first_seq > $2 AND r.last_received_at >= $3 ORDER BY r.first_seq LIMIT 1000`,
        [dataSetId, after, sinceMs],
      );
      if (rows.length === 0) return;
      after = rows[rows.length - 1]!.first_seq;
      await onPage(rows.map(recordOf));
      if (rows.length < 1000) return;
    }
  }

  async counters(dataSetId: string, sinceHourMs: number): Promise<CounterRow[]> {
    const { rows } = await this.#pool.query<{ hour: number; name: string; n: number }>(
      // Summed over the record shards (one row per counter in the data-set layout).
      'SELECT hour, name, SUM(n) AS n FROM view_counters WHERE data_set_id = $1 AND hour >= $2 GROUP BY hour, name HAVING SUM(n) <> 0',
      [dataSetId, sinceHourMs],
    );
    return counterRows(rows);
  }

  async heartbeat(beat: ConsumerHeartbeat): Promise<void> {
    await this.#pool.query(
      'INSERT INTO consumer_heartbeats (consumer, pid, at) VALUES ($1, $2, $3) ON CONFLICT (consumer) DO UPDATE SET pid = excluded.pid, at = excluded.at',
      [beat.consumer, beat.pid, beat.at],
    );
  }

  async lastHeartbeat(consumer: string): Promise<ConsumerHeartbeat | null> {
    const { rows } = await this.#pool.query<ConsumerHeartbeat>('SELECT consumer, pid, at FROM consumer_heartbeats WHERE consumer = $1', [consumer]);
    return rows[0] ?? null;
  }

  async close(): Promise<void> {
    // The pool belongs to the storage.
  }
}

export class PostgresIngestStatsStore implements IngestStatsStore {
  readonly #pool: Pool;

  constructor(pool: Pool) {
    this.#pool = pool;
  }

  async add(deltas: readonly DataSetCounterDelta[]): Promise<void> {
    if (deltas.length === 0) return;
    // Merge duplicate keys first: one row may not be updated twice by one INSERT ... ON CONFLICT.
    const merged = new Map<string, DataSetCounterDelta>();
    for (const d of deltas) {
      const key = `${d.dataSetId}\u0000${d.hour}\u0000${d.name}`;
      const prev = merged.get(key);
      merged.set(key, prev ? { ...d, n: prev.n + d.n } : d);
    }
    const list = [...merged.values()];
    await this.#pool.query(
      `INSERT INTO ingest_counters (data_set_id, hour, name, n)
       SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[])
       ON CONFLICT (data_set_id, hour, name) DO UPDATE SET n = ingest_counters.n + excluded.n`,
      [list.map((d) => d.dataSetId), list.map((d) => d.hour), list.map((d) => d.name), list.map((d) => d.n)],
    );
  }

  async counters(dataSetId: string, sinceHourMs: number): Promise<CounterRow[]> {
    const { rows } = await this.#pool.query<{ hour: number; name: string; n: number }>(
      'SELECT hour, name, n FROM ingest_counters WHERE data_set_id = $1 AND hour >= $2',
      [dataSetId, sinceHourMs],
    );
    return counterRows(rows);
  }

  async close(): Promise<void> {}
}
