/**
 * The control plane's rows in SQLite (`<env dir>/control.db`), under ControlPlaneService.
 *
 * Several processes (a serving node and an operator's CLI) open the same file: WAL mode lets the
 * server's poll read while the CLI writes, and busy_timeout rides over short write locks. Within
 * one process, units of work run one at a time on the one connection (better-sqlite3 is
 * synchronous, but the service's work is async: two interleaved units would share a transaction).
 * Write units take the write lock at BEGIN IMMEDIATE, so a unit that reads then writes cannot
 * deadlock against another process upgrading its own read lock.
 */
import Database from 'better-sqlite3';
import { prepareDatabaseFile } from '../fs/durable-files.js';
import { updatedColumns, type ControlRows, type ControlStore, type DataSetRow, type GrantRow, type KeyRow } from './control-store.js';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS control_meta (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL);
INSERT OR IGNORE INTO control_meta (id, version) VALUES (1, 1);
CREATE TABLE IF NOT EXISTS data_sets (
  id TEXT PRIMARY KEY,
  created_at INTEGER NOT NULL,
  policy TEXT NOT NULL,
  limits TEXT
);
CREATE TABLE IF NOT EXISTS signing_keys (
  key_id TEXT PRIMARY KEY,
  secret_sealed BLOB NOT NULL,
  created_at INTEGER NOT NULL,
  rotated_at INTEGER,
  previous_secret_sealed BLOB,
  previous_valid_until INTEGER,
  revoked_at INTEGER
);
CREATE TABLE IF NOT EXISTS grants (
  key_id TEXT NOT NULL REFERENCES signing_keys(key_id),
  data_set_id TEXT NOT NULL REFERENCES data_sets(id),
  created_at INTEGER NOT NULL,
  PRIMARY KEY (key_id, data_set_id)
);
`;

class SqliteControlRows implements ControlRows {
  readonly #db: Database.Database;
  constructor(db: Database.Database) {
    this.#db = db;
  }
  async version(): Promise<number> {
    return (this.#db.prepare('SELECT version FROM control_meta WHERE id = 1').get() as { version: number }).version;
  }
  async bumpVersion(): Promise<void> {
    this.#db.prepare('UPDATE control_meta SET version = version + 1 WHERE id = 1').run();
  }
  async dataSet(id: string): Promise<DataSetRow | undefined> {
    // No row lock needed: a write unit holds the database's write lock from BEGIN IMMEDIATE.
    return this.#db.prepare('SELECT id, created_at, policy, limits FROM data_sets WHERE id = ?').get(id) as DataSetRow | undefined;
  }
  async dataSets(): Promise<DataSetRow[]> {
    return this.#db.prepare('SELECT id, created_at, policy, limits FROM data_sets ORDER BY id').all() as DataSetRow[];
  }
  async insertDataSet(row: DataSetRow): Promise<boolean> {
    const result = this.#db
      .prepare('INSERT OR IGNORE INTO data_sets (id, created_at, policy, limits) VALUES (?, ?, ?, ?)')
      .run(row.id, row.created_at, row.policy, row.limits);
    return result.changes > 0;
  }
  async updateDataSet(id: string, columns: { policy?: string; limits?: string | null }): Promise<void> {
    const set = updatedColumns('data_sets', columns);
    this.#db.prepare(`UPDATE data_sets SET ${set.names.map((name) => `${name} = ?`).join(', ')} WHERE id = ?`).run(...set.values, id);
  }
  async key(keyId: string): Promise<KeyRow | undefined> {
    return this.#db.prepare('SELECT * FROM signing_keys WHERE key_id = ?').get(keyId) as KeyRow | undefined;
  }
  async keys(): Promise<KeyRow[]> {
    return this.#db.prepare('SELECT * FROM signing_keys ORDER BY created_at, key_id').all() as KeyRow[];
  }
  async insertKey(row: Pick<KeyRow, 'key_id' | 'secret_sealed' | 'created_at'>): Promise<void> {
    this.#db.prepare('INSERT INTO signing_keys (key_id, secret_sealed, created_at) VALUES (?, ?, ?)').run(row.key_id, row.secret_sealed, row.created_at);
  }
  async updateKey(keyId: string, columns: Partial<Omit<KeyRow, 'key_id' | 'created_at'>>): Promise<void> {
    const set = updatedColumns('signing_keys', columns);
    this.#db.prepare(`UPDATE signing_keys SET ${set.names.map((name) => `${name} = ?`).join(', ')} WHERE key_id = ?`).run(...set.values, keyId);
  }
  async grantsOf(keyId: string): Promise<string[]> {
    return this.#db.prepare('SELECT data_set_id FROM grants WHERE key_id = ? ORDER BY data_set_id').pluck().all(keyId) as string[];
  }
  async grants(): Promise<GrantRow[]> {
    return this.#db.prepare('SELECT key_id, data_set_id FROM grants').all() as GrantRow[];
  }
  async insertGrant(keyId: string, dataSetId: string, createdAt: number): Promise<boolean> {
    return this.#db.prepare('INSERT OR IGNORE INTO grants (key_id, data_set_id, created_at) VALUES (?, ?, ?)').run(keyId, dataSetId, createdAt).changes > 0;
  }
  async deleteGrant(keyId: string, dataSetId: string): Promise<boolean> {
    return this.#db.prepare('DELETE FROM grants WHERE key_id = ? AND data_set_id = ?').run(keyId, dataSetId).changes > 0;
  }
  async masterKeyFingerprint(): Promise<string | null> {
    return (this.#db.prepare('SELECT master_key_fingerprint AS f FROM control_meta WHERE id = 1').get() as { f: string | null }).f;
  }
  async claimMasterKeyFingerprint(fingerprint: string): Promise<void> {
    this.#db.prepare('UPDATE control_meta SET master_key_fingerprint = ? WHERE id = 1 AND master_key_fingerprint IS NULL').run(fingerprint);
  }
  async sampleSealedSecret(): Promise<Pick<KeyRow, 'key_id' | 'secret_sealed'> | undefined> {
    return this.#db.prepare('SELECT key_id, secret_sealed FROM signing_keys ORDER BY rowid LIMIT 1').get() as
      | Pick<KeyRow, 'key_id' | 'secret_sealed'>
      | undefined;
  }
}

export class SqliteControlStore implements ControlStore {
  readonly name: string;
  readonly #db: Database.Database;
  readonly #rows: SqliteControlRows;
  readonly #sealedElsewhere: () => boolean;
  /** The tail of the chain of units of work on this connection (one at a time). */
  #turn: Promise<unknown> = Promise.resolve();

  /** `sealedElsewhere`: whether another control plane sharing the key file holds secrets (then a missing key file is never recreated). */
  constructor(file: string, options: { sealedElsewhere?: () => boolean } = {}) {
    // The directory and the empty file are created durably and private (0700/0600); SQLite's -wal
    // and -shm take the database's mode.
    prepareDatabaseFile(file);
    this.#db = new Database(file);
    try {
      // First: a serving node's processes and the CLI open this file at the same moment; the WAL
      // switch and the schema must wait for a lock, not fail with "database is locked".
      this.#db.pragma('busy_timeout = 5000');
      this.#db.pragma('journal_mode = WAL');
      this.#db.pragma('synchronous = FULL');
      this.#db.pragma('foreign_keys = ON');
      this.#db.exec(SCHEMA);
      // Files created before rate limits existed lack the column.
      const columns = this.#db.prepare('PRAGMA table_info(data_sets)').all() as { name: string }[];
      if (!columns.some((c) => c.name === 'limits')) this.#db.exec('ALTER TABLE data_sets ADD COLUMN limits TEXT');
      // Files created before master-key fingerprints existed lack the column (checked by a sealed secret then).
      const metaColumns = this.#db.prepare('PRAGMA table_info(control_meta)').all() as { name: string }[];
      if (!metaColumns.some((c) => c.name === 'master_key_fingerprint')) {
        this.#db.transaction(() => {
          const again = this.#db.prepare('PRAGMA table_info(control_meta)').all() as { name: string }[];
          if (!again.some((c) => c.name === 'master_key_fingerprint')) this.#db.exec('ALTER TABLE control_meta ADD COLUMN master_key_fingerprint TEXT');
        }).immediate();
      }
    } catch (error) {
      this.#db.close(); // e.g. "database is locked": the caller may try again, and leaks no connection
      throw error;
    }
    this.name = file;
    this.#rows = new SqliteControlRows(this.#db);
    this.#sealedElsewhere = options.sealedElsewhere ?? (() => false);
  }

  #exclusive<T>(work: () => Promise<T>): Promise<T> {
    const run = this.#turn.then(work, work);
    this.#turn = run.catch(() => undefined);
    return run;
  }

  transaction<T>(work: (rows: ControlRows) => Promise<T>, mode: 'write' | 'snapshot' = 'write'): Promise<T> {
    return this.#exclusive(async () => {
      this.#db.exec(mode === 'write' ? 'BEGIN IMMEDIATE' : 'BEGIN');
      try {
        const result = await work(this.#rows);
        this.#db.exec('COMMIT');
        return result;
      } catch (error) {
        if (this.#db.inTransaction) this.#db.exec('ROLLBACK');
        throw error;
      }
    });
  }

  read<T>(work: (rows: ControlRows) => Promise<T>): Promise<T> {
    return this.#exclusive(() => work(this.#rows));
  }

  sealedElsewhere(): boolean {
    return this.#sealedElsewhere();
  }

  async close(): Promise<void> {
    await this.#exclusive(async () => this.#db.close());
  }
}

/**
 * Whether an existing control.db holds anything sealed (a key, or a master-key fingerprint), read
 * without the master key and without changing the file (files from before fingerprints included).
 */
export function controlFileHoldsSecrets(file: string): boolean {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    db.pragma('busy_timeout = 5000');
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('control_meta', 'signing_keys')").pluck().all() as string[];
    if (tables.includes('signing_keys') && db.prepare('SELECT 1 FROM signing_keys LIMIT 1').get()) return true;
    if (tables.includes('control_meta')) {
      const columns = db.prepare('SELECT name FROM pragma_table_info(?)').pluck().all('control_meta') as string[];
      if (columns.includes('master_key_fingerprint') && db.prepare('SELECT 1 FROM control_meta WHERE master_key_fingerprint IS NOT NULL').get()) return true;
    }
    return false;
  } finally {
    db.close();
  }
}
