/**
 * Deletions in the PostgreSQL merged view (retention, a person's data, one event), with the rules
 * of the embedded one (sqlite-view-eraser.ts): short transactions of at most `limit` rows, an
 * identity deleted with its last record, counters kept. Row locks only: a consumer batch waits only
 * if it touches the same rows (a record being deleted), for one short transaction.
 *
 * Space: deleted rows are dead tuples until (auto)vacuum marks their space free; later inserts
 * reuse it, so the tables stop growing once retention deletes as much as comes in.
 */
import { inTransaction, type Pool, type PoolClient } from '../postgres/database.js';
import { zeroCounts, type ErasedCounts, type IdentityToErase, type ViewEraser } from './lifecycle-backend.js';

interface RecordIdentityRow {
  record_key: string;
  identity_key: string | null;
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
  counts.links += (await db.query('DELETE FROM identity_identifiers WHERE data_set_id = $1 AND identity_key = ANY($2::text[])', [dataSetId, keys])).rowCount ?? 0;
  counts.identities += (await db.query('DELETE FROM identity_nodes WHERE data_set_id = $1 AND identity_key = ANY($2::text[])', [dataSetId, keys])).rowCount ?? 0;
}

async function dropRecord(db: PoolClient, dataSetId: string, row: RecordIdentityRow, counts: ErasedCounts): Promise<void> {
  counts.records += (await db.query('DELETE FROM view_records WHERE data_set_id = $1 AND record_key = $2', [dataSetId, row.record_key])).rowCount ?? 0;
  if (row.identity_key === null) return;
  const root = await rootOf(db, dataSetId, row.identity_key);
  if (root === null) return;
  const { rows } = await db.query<{ event_count: number }>(
    'UPDATE identity_nodes SET event_count = event_count - 1 WHERE data_set_id = $1 AND identity_key = $2 RETURNING event_count',
    [dataSetId, root],
  );
  if (rows[0] && rows[0].event_count <= 0) await dropIdentity(db, dataSetId, root, counts);
}

export class PostgresViewEraser implements ViewEraser {
  readonly #pool: Pool;

  constructor(pool: Pool) {
    this.#pool = pool;
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
        `SELECT record_key, identity_key FROM view_records WHERE data_set_id = $1 AND last_received_at < $2
         ORDER BY last_received_at LIMIT $3 FOR UPDATE SKIP LOCKED`,
        [dataSetId, cutoffMs, limit],
      );
      for (const row of rows) await dropRecord(db, dataSetId, row, counts);
    });
    // Row locks only, held from the SELECT … FOR UPDATE to the commit.
    return { ...counts, heldMs: performance.now() - started };
  }

  async deleteRecord(dataSetId: string, recordKey: string): Promise<ErasedCounts> {
    const counts = zeroCounts();
    await inTransaction(this.#pool, async (db) => {
      const { rows } = await db.query<RecordIdentityRow>(
        'SELECT record_key, identity_key FROM view_records WHERE data_set_id = $1 AND record_key = $2 FOR UPDATE',
        [dataSetId, recordKey],
      );
      if (rows[0]) await dropRecord(db, dataSetId, rows[0], counts);
    });
    return counts;
  }

  /** The cursor is first_seq (unique per record), read through the (data_set_id, first_seq) index. */
  async deleteIdentityRecords(dataSetId: string, keys: ReadonlySet<string>, after: number, limit: number): Promise<{ counts: ErasedCounts; next: number | null; deletedEventIds: string[] }> {
    const counts = zeroCounts();
    const { rows } = await this.#pool.query<{ first_seq: string; n: string }>(
      `WITH page AS (SELECT record_key, identity_key, first_seq FROM view_records WHERE data_set_id = $1 AND first_seq > $2 ORDER BY first_seq LIMIT $3),
            gone AS (DELETE FROM view_records v USING page p WHERE v.data_set_id = $1 AND v.record_key = p.record_key AND p.identity_key = ANY($4::text[]) RETURNING v.record_key)
       SELECT (SELECT max(first_seq) FROM page) AS first_seq, (SELECT count(*) FROM page) AS n, (SELECT count(*) FROM gone) AS gone,
              (SELECT coalesce(array_agg(record_key), '{}') FROM gone) AS keys`,
      [dataSetId, after, limit, [...keys]],
    );
    const row = rows[0] as unknown as { first_seq: string | null; n: string; gone: string; keys: string[] };
    counts.records = Number(row.gone);
    const deletedEventIds = row.keys.filter((key) => key.startsWith('id:')).map((key) => key.slice(3));
    return { counts, next: Number(row.n) < limit || row.first_seq === null ? null : Number(row.first_seq), deletedEventIds };
  }

  async deleteIdentity(dataSetId: string, root: string): Promise<ErasedCounts> {
    const counts = zeroCounts();
    await inTransaction(this.#pool, (db) => dropIdentity(db, dataSetId, root, counts));
    return counts;
  }
}
