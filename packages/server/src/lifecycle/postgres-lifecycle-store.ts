/**
 * The scale-out profile's lifecycle store: deletion requests, suppressions and the audit log in the
 * environment's schema (migrations 4 and 5, postgres/migrations.ts), with the same rules as lifecycle.db
 * (sqlite-lifecycle-store.ts): a target in clear only while its request is pending, digests under a
 * random key kept in `lifecycle_meta` otherwise. `lifecycle_meta.version` moves with every new
 * suppression, so that consumers reload the list only when it changed.
 */
import { randomBytes } from 'node:crypto';
import { inTransaction, type Pool, type PoolClient } from '../postgres/database.js';
import { eventDigest, identifierDigest, suppressionDigest, targetDigest } from './identifier-digest.js';
import {
  deletionRequestOf,
  type DeletionRequest,
  type DeletionRequestRow,
  type DeletionResult,
  type LifecycleStore,
  type NewDeletionRequest,
  type SuppressionFilter,
  type TargetDigester,
} from './lifecycle-backend.js';
import { SharedNextRun } from '../model/shared-next-run.js';
import { SuppressionSet } from './suppression-set.js';

/**
 * A request's running tally while it is carried out (issue 29), kept in its `result` column with
 * `partial: true` (no schema change) and updated by the very transaction that deletes, so counts
 * are exact across a worker that died and the one that took over. Read back as "no result yet".
 * `straddlers` holds the deleted records with an event id (lifecycle-backend.ts `erasedRecordEntry`:
 * the id and the last position merged into the record, whose queued copies go too; the name is
 * the one the tally had when it held only records merged after the bound): `settle` replaces the tally with
 * the final counts, and the old row version goes with the VACUUM of `complete`.
 */
export interface PgTally {
  view_records: number;
  identities: number;
  identifier_links: number;
  queue_events: number;
  max_seq: number;
  straddlers: string[];
}

const emptyTally = (): PgTally => ({ view_records: 0, identities: 0, identifier_links: 0, queue_events: 0, max_seq: 0, straddlers: [] });

export async function readPgTally(db: PoolClient | Pool, requestId: number, lock = false): Promise<PgTally> {
  const { rows } = await db.query<{ result: string | null }>(`SELECT result FROM deletion_requests WHERE id = $1${lock ? ' FOR UPDATE' : ''}`, [requestId]);
  const parsed = rows[0]?.result ? (JSON.parse(rows[0].result) as Partial<PgTally> & { partial?: boolean }) : null;
  return parsed?.partial ? { ...emptyTally(), ...parsed } : emptyTally();
}

/** Adds to the tally inside the caller's transaction (the row is locked until it commits). */
export async function addPgTally(db: PoolClient, requestId: number, delta: Partial<PgTally>): Promise<void> {
  const t = await readPgTally(db, requestId, true);
  const next = {
    partial: true,
    view_records: t.view_records + (delta.view_records ?? 0),
    identities: t.identities + (delta.identities ?? 0),
    identifier_links: t.identifier_links + (delta.identifier_links ?? 0),
    queue_events: t.queue_events + (delta.queue_events ?? 0),
    max_seq: Math.max(t.max_seq, delta.max_seq ?? 0),
    straddlers: [...new Set([...t.straddlers, ...(delta.straddlers ?? [])])],
  };
  await db.query("UPDATE deletion_requests SET result = $2 WHERE id = $1 AND state = 'pending'", [requestId, JSON.stringify(next)]);
}

/** A row as the runner sees it: a running tally is no result yet. */
function requestOf(row: DeletionRequestRow): DeletionRequest {
  const request = deletionRequestOf(row);
  return request.result && (request.result as unknown as { partial?: boolean }).partial ? { ...request, result: null } : request;
}

/** The digest key, created by the first process that needs it (every process reads the same row). */
async function digestKey(pool: Pool): Promise<Buffer> {
  await pool.query('INSERT INTO lifecycle_meta (id, digest_key, version) VALUES (1, $1, 0) ON CONFLICT (id) DO NOTHING', [randomBytes(32)]);
  return (await pool.query<{ digest_key: Buffer }>('SELECT digest_key FROM lifecycle_meta WHERE id = 1')).rows[0]!.digest_key;
}

export class PostgresLifecycleStore implements LifecycleStore {
  readonly #pool: Pool;
  #key: Promise<Buffer> | null = null;

  constructor(pool: Pool) {
    this.#pool = pool;
  }

  #digestKey(): Promise<Buffer> {
    return (this.#key ??= digestKey(this.#pool));
  }

  async digest(dataSetId: string, value: string): Promise<string> {
    return suppressionDigest(await this.#digestKey(), dataSetId, value);
  }

  async request(input: NewDeletionRequest): Promise<DeletionRequest> {
    const { rows } = await this.#pool.query<DeletionRequestRow>(
      `INSERT INTO deletion_requests (data_set_id, kind, target, target_digest, suppress, bound_seq, actor, requested_at, state)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending') RETURNING *`,
      [input.dataSetId, input.kind, input.target, targetDigest(await this.#digestKey(), input.dataSetId, input.kind, input.target), input.suppress, input.boundSeq, input.actor, input.nowMs ?? Date.now()],
    );
    return requestOf(rows[0]!);
  }

  async get(id: number): Promise<DeletionRequest | null> {
    const { rows } = await this.#pool.query<DeletionRequestRow>('SELECT * FROM deletion_requests WHERE id = $1', [id]);
    return rows[0] ? requestOf(rows[0]) : null;
  }

  async pending(): Promise<DeletionRequest[]> {
    const { rows } = await this.#pool.query<DeletionRequestRow>("SELECT * FROM deletion_requests WHERE state = 'pending' ORDER BY id");
    return rows.map(requestOf);
  }

  async audit(dataSetId?: string, limit = 1000): Promise<DeletionRequest[]> {
    const { rows } =
      dataSetId === undefined
        ? await this.#pool.query<DeletionRequestRow>('SELECT * FROM deletion_requests ORDER BY id DESC LIMIT $1', [limit])
        : await this.#pool.query<DeletionRequestRow>('SELECT * FROM deletion_requests WHERE data_set_id = $1 ORDER BY id DESC LIMIT $2', [dataSetId, limit]);
    return rows.map(requestOf);
  }

  async after(afterId: number, limit: number): Promise<DeletionRequest[]> {
    const { rows } = await this.#pool.query<DeletionRequestRow>('SELECT * FROM deletion_requests WHERE id > $1 ORDER BY id LIMIT $2', [afterId, limit]);
    return rows.map(requestOf);
  }

  async targetDigester(): Promise<TargetDigester> {
    const key = await this.#digestKey();
    return (dataSetId, kind, value) => targetDigest(key, dataSetId, kind, value);
  }

  /** Requests this process holds, each by a session advisory lock on a connection of its own. */
  readonly #held = new Map<number, PoolClient>();

  /**
   * A claim is a session-level advisory lock (keyed by the environment's schema and the request id)
   * held on a connection of its own for as long as this process carries the request out: if the
   * process dies, even by SIGKILL, its connection closes and PostgreSQL releases the lock at once,
   * so another worker takes the request over immediately (issue 29: a lease of minutes held it).
   * `forMs` is kept in claimed_until for operators only.
   */
  async claim(id: number, forMs: number, nowMs = Date.now()): Promise<boolean> {
    const held = this.#held.get(id);
    if (held) {
      const { rowCount } = await held.query("UPDATE deletion_requests SET claimed_until = $1 WHERE id = $2 AND state = 'pending'", [nowMs + forMs, id]);
      if (rowCount === 1) return true;
      await this.#release(id);
      return false;
    }
    const client = await this.#pool.connect();
    let locked = false;
    try {
      const { rows } = await client.query<{ locked: boolean }>("SELECT pg_try_advisory_lock(hashtext(current_schema() || ':deletion_requests'), $1::int) AS locked", [id]);
      locked = rows[0]!.locked;
      if (locked) {
        const { rowCount } = await client.query("UPDATE deletion_requests SET claimed_until = $1 WHERE id = $2 AND state = 'pending'", [nowMs + forMs, id]);
        if (rowCount === 1) {
          this.#held.set(id, client);
          return true;
        }
      }
    } catch (error) {
      client.release(true);
      throw error;
    }
    if (locked) await client.query("SELECT pg_advisory_unlock(hashtext(current_schema() || ':deletion_requests'), $1::int)", [id]).catch(() => undefined);
    client.release();
    return false;
  }

  async #release(id: number): Promise<void> {
    const client = this.#held.get(id);
    if (!client) return;
    this.#held.delete(id);
    try {
      await client.query("SELECT pg_advisory_unlock(hashtext(current_schema() || ':deletion_requests'), $1::int)", [id]);
      client.release();
    } catch {
      client.release(true); // a broken connection: its session (and lock) end with it
    }
  }

  async settle(id: number, result: DeletionResult): Promise<void> {
    await this.#pool.query("UPDATE deletion_requests SET result = $2 WHERE id = $1 AND state = 'pending'", [id, JSON.stringify(result)]);
  }

  async suppress(dataSetId: string, digests: readonly string[], requestId: number, nowMs = Date.now()): Promise<number> {
    return inTransaction(this.#pool, async (db) => {
      const { rowCount } = await db.query(
        `INSERT INTO suppressions (data_set_id, digest, request_id, added_at) SELECT $1, d, $3, $4 FROM unnest($2::text[]) AS d
         ON CONFLICT DO NOTHING`,
        [dataSetId, digests, requestId, nowMs],
      );
      if (rowCount) await db.query('UPDATE lifecycle_meta SET version = version + 1 WHERE id = 1');
      return rowCount ?? 0;
    });
  }

  async complete(id: number, result: DeletionResult, nowMs = Date.now()): Promise<void> {
    await this.#pool.query("UPDATE deletion_requests SET state = 'done', done_at = $1, result = $2, target = NULL WHERE id = $3", [nowMs, JSON.stringify(result), id]);
    await this.#release(id);
    // The old row versions (the target in clear, a tally naming event ids) are dead tuples: VACUUM
    // makes their space reusable now rather than at autovacuum's pace (docs/SECURITY.md says what
    // it does not do: overwrite the bytes, or reach the WAL and backups).
    await this.#pool.query('VACUUM deletion_requests');
  }

  async noteDeletedEvents(dataSetId: string, eventIds: readonly string[], requestId: number): Promise<void> {
    if (eventIds.length === 0) return;
    const key = await this.#digestKey();
    await this.#pool.query(
      `INSERT INTO deleted_events (data_set_id, event_digest, request_id) SELECT $1, d, $3 FROM unnest($2::text[]) AS d ON CONFLICT DO NOTHING`,
      [dataSetId, eventIds.map((id) => eventDigest(key, dataSetId, id)), requestId],
    );
  }

  async deletedBy(dataSetId: string, eventId: string): Promise<DeletionRequest | null> {
    const key = await this.#digestKey();
    const { rows } = await this.#pool.query<DeletionRequestRow>(
      `(SELECT r.* FROM deleted_events d JOIN deletion_requests r ON r.id = d.request_id WHERE d.data_set_id = $1 AND d.event_digest = $2)
       UNION ALL
       (SELECT * FROM deletion_requests WHERE data_set_id = $1 AND kind = 'delete_event' AND target_digest = $3 AND state = 'done')
       LIMIT 1`,
      [dataSetId, eventDigest(key, dataSetId, eventId), identifierDigest(key, dataSetId, eventId)],
    );
    return rows[0] ? requestOf(rows[0]) : null;
  }

  async close(): Promise<void> {
    for (const id of [...this.#held.keys()]) await this.#release(id);
  }
}

/**
 * The suppression list of a PostgreSQL consumer: reloaded when `lifecycle_meta.version` moved. The
 * consumer calls `refresh` with its lane's offset row locked before every batch
 * (consumer/view-consumer.ts), so `pool` must not be the one the batches hold their
 * connections from (storage/postgres-storage.ts gives it a pool of its own, of one connection).
 *
 * Calls share reads (model/shared-next-run.ts): each call gets a read that starts after it, so it
 * returns with the list as it was at some moment after the call (what the lock argument needs: a
 * suppression committed before the lane took its lock is seen), and the busy lanes of a worker (up
 * to 16 partitions, more lanes in the sharded layout) cost at most two reads in a row instead of
 * queuing one each on the single connection.
 */
export class PostgresSuppressionList implements SuppressionFilter {
  readonly #pool: Pool;
  readonly #set = new SuppressionSet();
  readonly #reads = new SharedNextRun(() => this.#read());

  constructor(pool: Pool) {
    this.#pool = pool;
  }

  refresh(): Promise<void> {
    return this.#reads.run();
  }

  async #read(): Promise<void> {
    const meta = (await this.#pool.query<{ digest_key: Buffer; version: string }>('SELECT digest_key, version FROM lifecycle_meta WHERE id = 1')).rows[0];
    if (!meta || Number(meta.version) === this.#set.version) return;
    const { rows } = await this.#pool.query<{ data_set_id: string; digest: string }>('SELECT data_set_id, digest FROM suppressions');
    this.#set.load(meta.digest_key, Number(meta.version), rows);
  }

  suppressed(dataSetId: string, identifiers: readonly string[]): boolean {
    return this.#set.suppressed(dataSetId, identifiers);
  }
}
