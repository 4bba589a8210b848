/**
 * The control plane's rows in PostgreSQL, under ControlPlaneService: the same tables as the
 * SQLite store, shared by every node of a cluster and by the CLI on any machine. Nodes poll the
 * version (one indexed read per node per second) and reload their snapshot when it moved, so a
 * change made anywhere reaches every node within about a second.
 *
 * Ids sort with COLLATE "C" (byte order, as SQLite sorts), whatever the database's collation.
 * Rows read to be changed are locked FOR UPDATE: two nodes patching one policy serialise.
 */
import { inTransaction, type Pool, type PoolClient } from '../postgres/database.js';
import { updatedColumns, type ControlRows, type ControlStore, type DataSetRow, type GrantRow, type KeyRow } from './control-store.js';

type Queryable = Pick<PoolClient, 'query'>;

/** `a = $1, b = $2`. */
const placeholders = (names: readonly string[]) => names.map((name, i) => `${name} = $${i + 1}`).join(', ');

class PostgresControlRows implements ControlRows {
  readonly #db: Queryable;
  constructor(db: Queryable) {
    this.#db = db;
  }
  async version(): Promise<number> {
    return (await this.#db.query<{ version: number }>('SELECT version FROM control_meta WHERE id = 1')).rows[0]!.version;
  }
  async bumpVersion(): Promise<void> {
    await this.#db.query('UPDATE control_meta SET version = version + 1 WHERE id = 1');
  }
  async dataSet(id: string, forUpdate = false): Promise<DataSetRow | undefined> {
    const { rows } = await this.#db.query<DataSetRow>(`SELECT id, created_at, policy, limits FROM data_sets WHERE id = $1${forUpdate ? ' FOR UPDATE' : ''}`, [id]);
    return rows[0];
  }
  async dataSets(): Promise<DataSetRow[]> {
    return (await this.#db.query<DataSetRow>('SELECT id, created_at, policy, limits FROM data_sets ORDER BY id COLLATE "C"')).rows;
  }
  async insertDataSet(row: DataSetRow): Promise<boolean> {
    const result = await this.#db.query(
      'INSERT INTO data_sets (id, created_at, policy, limits) VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING',
      [row.id, row.created_at, row.policy, row.limits],
    );
    return (result.rowCount ?? 0) > 0;
  }
  async updateDataSet(id: string, columns: { policy?: string; limits?: string | null }): Promise<void> {
    const set = updatedColumns('data_sets', columns);
    await this.#db.query(`UPDATE data_sets SET ${placeholders(set.names)} WHERE id = $${set.names.length + 1}`, [...set.values, id]);
  }
  async key(keyId: string, forUpdate = false): Promise<KeyRow | undefined> {
    return (await this.#db.query<KeyRow>(`SELECT * FROM signing_keys WHERE key_id = $1${forUpdate ? ' FOR UPDATE' : ''}`, [keyId])).rows[0];
  }
  async keys(): Promise<KeyRow[]> {
    return (await this.#db.query<KeyRow>('SELECT * FROM signing_keys ORDER BY created_at, key_id COLLATE "C"')).rows;
  }
  async insertKey(row: Pick<KeyRow, 'key_id' | 'secret_sealed' | 'created_at'>): Promise<void> {
    await this.#db.query('INSERT INTO signing_keys (key_id, secret_sealed, created_at) VALUES ($1, $2, $3)', [row.key_id, row.secret_sealed, row.created_at]);
  }
  async updateKey(keyId: string, columns: Partial<Omit<KeyRow, 'key_id' | 'created_at'>>): Promise<void> {
    const set = updatedColumns('signing_keys', columns);
    await this.#db.query(`UPDATE signing_keys SET ${placeholders(set.names)} WHERE key_id = $${set.names.length + 1}`, [...set.values, keyId]);
  }
  async grantsOf(keyId: string): Promise<string[]> {
    const { rows } = await this.#db.query<{ data_set_id: string }>('SELECT data_set_id FROM grants WHERE key_id = $1 ORDER BY data_set_id COLLATE "C"', [keyId]);
    return rows.map((row) => row.data_set_id);
  }
  async grants(): Promise<GrantRow[]> {
    return (await this.#db.query<GrantRow>('SELECT key_id, data_set_id FROM grants')).rows;
  }
  async insertGrant(keyId: string, dataSetId: string, createdAt: number): Promise<boolean> {
    const result = await this.#db.query('INSERT INTO grants (key_id, data_set_id, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [keyId, dataSetId, createdAt]);
    return (result.rowCount ?? 0) > 0;
  }
  async deleteGrant(keyId: string, dataSetId: string): Promise<boolean> {
    return ((await this.#db.query('DELETE FROM grants WHERE key_id = $1 AND data_set_id = $2', [keyId, dataSetId])).rowCount ?? 0) > 0;
  }
  async masterKeyFingerprint(): Promise<string | null> {
    return (await this.#db.query<{ f: string | null }>('SELECT master_key_fingerprint AS f FROM control_meta WHERE id = 1')).rows[0]!.f;
  }
  async claimMasterKeyFingerprint(fingerprint: string): Promise<void> {
    await this.#db.query('UPDATE control_meta SET master_key_fingerprint = $1 WHERE id = 1 AND master_key_fingerprint IS NULL', [fingerprint]);
  }
  async sampleSealedSecret(): Promise<Pick<KeyRow, 'key_id' | 'secret_sealed'> | undefined> {
    return (await this.#db.query<Pick<KeyRow, 'key_id' | 'secret_sealed'>>('SELECT key_id, secret_sealed FROM signing_keys ORDER BY created_at, key_id LIMIT 1')).rows[0];
  }
}

export class PostgresControlStore implements ControlStore {
  readonly name: string;
  readonly #pool: Pool;

  /** `name`: how messages about the master key name this control plane (e.g. the schema). */
  constructor(pool: Pool, options: { name?: string } = {}) {
    this.#pool = pool;
    this.name = options.name ?? 'PostgreSQL';
  }

  transaction<T>(work: (rows: ControlRows) => Promise<T>, mode: 'write' | 'snapshot' = 'write'): Promise<T> {
    // A snapshot is one REPEATABLE READ transaction: the version and the rows it describes are one point in time.
    return inTransaction(this.#pool, (client) => work(new PostgresControlRows(client)), mode === 'snapshot' ? 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY' : 'BEGIN');
  }

  read<T>(work: (rows: ControlRows) => Promise<T>): Promise<T> {
    return work(new PostgresControlRows(this.#pool));
  }

  sealedElsewhere(): boolean {
    return false;
  }

  async close(): Promise<void> {
    // The pool belongs to the storage that created this control plane.
  }
}
