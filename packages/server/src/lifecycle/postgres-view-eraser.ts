/**
 * Deletions in the PostgreSQL merged view (retention, a person's data, one event), with the rules
 * of the embedded one (sqlite-view-eraser.ts): short transactions of at most `limit` rows, an
 * identity deleted with its last record, counters kept. Row locks only: a consumer batch waits only
 * if it touches the same rows (a record being deleted), for one short transaction.
 *
 * Space: deleted rows are dead tuples until (auto)vacuum marks their space free; later inserts
 * reuse it, so the tables stop growing once retention deletes as much as comes in. After a person's
 * deletion, `truncate` runs VACUUM on the view's tables (issue 29): the dead row versions leave
 * the tables' visible space now; their bytes stay in the data files until the space is reused, and
 * in the server's WAL, archives and backups until those expire (docs/SECURITY.md).
 *
 * Counts (issue 29): each transaction that deletes for a request adds to its tally in the same
 * transaction (postgres-lifecycle-store.ts addPgTally), so they are exact across takeovers.
 */
import { inTransaction, type Pool, type PoolClient } from '../postgres/database.js';
import { erasedRecordEntry, erasedRecordOf, zeroCounts, type ErasedCounts, type IdentityToErase, type ViewEraser, type ViewTally } from './lifecycle-backend.js';
import { addPgTally, readPgTally } from './postgres-lifecycle-store.js';

interface RecordIdentityRow {
  record_key: string;
  identity_key: string | null;
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
        `SELECT record_key, identity_key FROM view_records
          WHERE data_set_id = $1 AND last_received_at < $2 AND COALESCE((event::jsonb ->> 'timestamp')::numeric, 0) * 1000 + 1000 < $2
         ORDER BY last_received_at LIMIT $3 FOR UPDATE SKIP LOCKED`,
        [dataSetId, cutoffMs, limit],
      );
      for (const row of rows) await dropRecord(db, dataSetId, row, counts);
    });
    // Row locks only, held from the SELECT … FOR UPDATE to the commit.
    return { ...counts, heldMs: performance.now() - started };
  }

  async deleteRecord(requestId: number, dataSetId: string, recordKey: string, boundSeq: number): Promise<void> {
    await inTransaction(this.#pool, async (db) => {
      const { rows } = await db.query<RecordIdentityRow & { first_seq: string; last_seq: string; event_id: string | null }>(
        'SELECT record_key, identity_key, first_seq, last_seq, event_id FROM view_records WHERE data_set_id = $1 AND record_key = $2 FOR UPDATE',
        [dataSetId, recordKey],
      );
      const row = rows[0];
      if (!row || Number(row.first_seq) > boundSeq) return; // first queued after the request: not covered
      const counts = zeroCounts();
      await dropRecord(db, dataSetId, row, counts);
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
      const { rows } = await db.query<{ first_seq: string | null; n: string; gone: { last_seq: string; event_id: string | null; record_key: string }[] | null }>(
        `WITH page AS (SELECT record_key, identity_key, first_seq FROM view_records WHERE data_set_id = $1 AND first_seq > $2 AND first_seq <= $5 ORDER BY first_seq LIMIT $3),
              gone AS (DELETE FROM view_records v USING page p WHERE v.data_set_id = $1 AND v.record_key = p.record_key AND p.identity_key = ANY($4::text[])
                       RETURNING v.last_seq, v.event_id, v.record_key)
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

  async truncate(): Promise<boolean> {
    await vacuum(this.#pool, ['view_records', 'identity_nodes', 'identity_identifiers']);
    return true;
  }
}
