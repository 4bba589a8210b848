/**
 * Embedded control plane on SQLite (`<env dir>/control.db`).
 *
 * Secrets are sealed with the SecretBox, bound to their key id; only ciphertext touches the file.
 * Several processes (a serving node and an operator's CLI) open the same file: WAL mode lets the
 * server's poll read while the CLI writes, and busy_timeout rides over short write locks.
 */
import Database from 'better-sqlite3';
import { createSecretKey } from 'node:crypto';
import { prepareDatabaseFile } from '../fs/durable-files.js';
import { ControlPlaneError } from '../errors.js';
import { DEFAULT_POLICY, policyFromStored, type DataSetPolicy } from './data-set-policy.js';
import { DEFAULT_LIMITS, validateLimits, type DataSetLimits } from '../rate-limit/data-set-limits.js';
import {
  DATA_SET_ID_PATTERN,
  type ActiveKey,
  type ControlPlane,
  type CredentialSnapshot,
  type DataSetRecord,
  type IssuedKey,
  type KeyRecord,
  type PolicyPatch,
  type RotatedKey,
  validatePolicyPatch,
  validatePolicyRetention,
  validateRotationGrace,
} from './control-plane.js';
import { masterKeyMismatch, unlockSecretBox, type MasterKeySource, type SecretBox } from './secret-box.js';
import { newKeyId, newSecret, previousAad, secretAad } from './signing-key-material.js';

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

interface KeyRow {
  key_id: string;
  secret_sealed: Buffer;
  created_at: number;
  rotated_at: number | null;
  previous_secret_sealed: Buffer | null;
  previous_valid_until: number | null;
  revoked_at: number | null;
}



export class SqliteControlPlane implements ControlPlane {
  readonly #db: Database.Database;
  readonly #file: string;
  readonly #keySource: MasterKeySource;
  readonly #sealedElsewhere: () => boolean;
  #unlocked: SecretBox | null = null;
  readonly #now: () => number;

  /**
   * `keys`: a SecretBox, or the loader of the master key (read when a secret is first sealed or
   * opened, and checked against the fingerprint stored here). `sealedElsewhere`: whether another
   * control plane sharing the key file holds secrets (then a missing key file is never recreated).
   */
  constructor(file: string, keys: MasterKeySource, now: () => number = Date.now, options: { sealedElsewhere?: () => boolean } = {}) {
    // The directory and the empty file are created durably and private (0700/0600); SQLite's -wal
    // and -shm take the database's mode.
    prepareDatabaseFile(file);
    this.#db = new Database(file);
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
    this.#file = file;
    this.#keySource = keys;
    this.#sealedElsewhere = options.sealedElsewhere ?? (() => false);
    this.#now = now;
  }

  /** The SecretBox, once the master key was loaded and found to be the one this control plane was sealed with. */
  #box(): SecretBox {
    if (this.#unlocked) return this.#unlocked;
    const fingerprint = () =>
      (this.#db.prepare('SELECT master_key_fingerprint AS f FROM control_meta WHERE id = 1').get() as { f: string | null }).f;
    const stored = fingerprint();
    const sample = this.#db.prepare('SELECT key_id, secret_sealed FROM signing_keys ORDER BY rowid LIMIT 1').get() as
      | { key_id: string; secret_sealed: Buffer }
      | undefined;
    const box = unlockSecretBox(
      this.#keySource,
      {
        fingerprint: stored,
        sample: sample ? { sealed: sample.secret_sealed, aad: secretAad(sample.key_id) } : null,
        sealedElsewhere: stored === null && !sample && this.#sealedElsewhere(),
      },
      this.#file,
    );
    if (stored === null) {
      // The first key to seal or open here; another process may store one at the same moment.
      this.#db.prepare('UPDATE control_meta SET master_key_fingerprint = ? WHERE id = 1 AND master_key_fingerprint IS NULL').run(box.fingerprint());
      if (!box.matches(fingerprint()!)) throw masterKeyMismatch('the master key in use', this.#file);
    }
    this.#unlocked = box;
    return box;
  }

  /** Loads the master key and checks it against this control plane (serve calls it at start). */
  async verifyMasterKey(): Promise<void> {
    this.#box();
  }

  /** Whether this control plane holds anything sealed (a fingerprint or a key), without the master key. */
  holdsSecrets(): boolean {
    const row = this.#db
      .prepare('SELECT (SELECT master_key_fingerprint FROM control_meta WHERE id = 1) IS NOT NULL OR EXISTS (SELECT 1 FROM signing_keys) AS h')
      .get() as { h: number };
    return row.h === 1;
  }

  #bump(): void {
    this.#db.prepare('UPDATE control_meta SET version = version + 1 WHERE id = 1').run();
  }

  #dataSet(id: string): DataSetRecord | undefined {
    const row = this.#db.prepare('SELECT id, created_at, policy, limits FROM data_sets WHERE id = ?').get(id) as
      | { id: string; created_at: number; policy: string; limits: string | null }
      | undefined;
    return (
      row && {
        id: row.id,
        createdAt: row.created_at,
        policy: policyFromStored(row.policy),
        limits: Object.freeze({ ...DEFAULT_LIMITS, ...(row.limits ? JSON.parse(row.limits) : {}) }),
      }
    );
  }

  #requireDataSet(id: string): DataSetRecord {
    const record = this.#dataSet(id);
    if (!record) throw new ControlPlaneError(`data set ${id} does not exist`);
    return record;
  }

  #keyRow(keyId: string): KeyRow {
    const row = this.#db.prepare('SELECT * FROM signing_keys WHERE key_id = ?').get(keyId) as KeyRow | undefined;
    if (!row) throw new ControlPlaneError(`key ${keyId} does not exist`);
    return row;
  }

  #keyRecord(row: KeyRow): KeyRecord {
    const dataSets = (
      this.#db.prepare('SELECT data_set_id FROM grants WHERE key_id = ? ORDER BY data_set_id').all(row.key_id) as {
        data_set_id: string;
      }[]
    ).map((grant) => grant.data_set_id);
    return {
      keyId: row.key_id,
      createdAt: row.created_at,
      rotatedAt: row.rotated_at,
      revokedAt: row.revoked_at,
      previousSecretValidUntil: row.previous_valid_until,
      dataSets,
    };
  }

  async createDataSet(id: string): Promise<DataSetRecord> {
    if (!DATA_SET_ID_PATTERN.test(id)) {
      throw new ControlPlaneError(
        `invalid data set id "${id}": 1-128 characters of letters, digits, '.', '_', ':' or '-', starting with a letter or digit`,
      );
    }
    return this.#db.transaction(() => {
      if (this.#dataSet(id)) throw new ControlPlaneError(`data set ${id} already exists`);
      const { version: _version, ...policy } = DEFAULT_POLICY;
      this.#db
        .prepare('INSERT INTO data_sets (id, created_at, policy) VALUES (?, ?, ?)')
        .run(id, this.#now(), JSON.stringify({ ...policy, version: 1 }));
      this.#bump();
      return this.#requireDataSet(id);
    })();
  }

  async listDataSets(): Promise<DataSetRecord[]> {
    const rows = this.#db.prepare('SELECT id FROM data_sets ORDER BY id').all() as { id: string }[];
    return rows.map((row) => this.#requireDataSet(row.id));
  }

  async setPolicy(dataSetId: string, patch: PolicyPatch): Promise<DataSetRecord> {
    validatePolicyPatch(patch);
    return this.#db.transaction(() => {
      const current = this.#requireDataSet(dataSetId);
      const next: DataSetPolicy = { ...current.policy, ...patch, version: current.policy.version + 1 };
      validatePolicyRetention(next);
      this.#db.prepare('UPDATE data_sets SET policy = ? WHERE id = ?').run(JSON.stringify(next), dataSetId);
      this.#bump();
      return this.#requireDataSet(dataSetId);
    })();
  }

  async setLimits(dataSetId: string, patch: Partial<DataSetLimits>): Promise<DataSetRecord> {
    return this.#db.transaction(() => {
      const current = this.#requireDataSet(dataSetId);
      const next = { ...current.limits, ...patch };
      try {
        validateLimits(next);
      } catch (error) {
        throw new ControlPlaneError((error as Error).message);
      }
      const overrides = Object.fromEntries(
        Object.entries(next).filter(([name, value]) => DEFAULT_LIMITS[name as keyof DataSetLimits] !== value),
      );
      this.#db
        .prepare('UPDATE data_sets SET limits = ? WHERE id = ?')
        .run(Object.keys(overrides).length > 0 ? JSON.stringify(overrides) : null, dataSetId);
      this.#bump();
      return this.#requireDataSet(dataSetId);
    })();
  }

  async createKey(dataSets: readonly string[]): Promise<IssuedKey> {
    if (dataSets.length === 0) throw new ControlPlaneError('a key needs at least one data set (--data-set <id>)');
    const unique = [...new Set(dataSets)].sort();
    const keyId = newKeyId();
    const secret = newSecret();
    this.#box(); // the master key is loaded and checked before anything is written
    this.#db.transaction(() => {
      for (const id of unique) this.#requireDataSet(id);
      const now = this.#now();
      this.#db
        .prepare('INSERT INTO signing_keys (key_id, secret_sealed, created_at) VALUES (?, ?, ?)')
        .run(keyId, this.#box().seal(secret, secretAad(keyId)), now);
      const grant = this.#db.prepare('INSERT INTO grants (key_id, data_set_id, created_at) VALUES (?, ?, ?)');
      for (const id of unique) grant.run(keyId, id, now);
      this.#bump();
    })();
    return { keyId, secret, dataSets: unique };
  }

  async rotateKey(keyId: string, graceMs: number): Promise<RotatedKey> {
    validateRotationGrace(graceMs);
    const secret = newSecret();
    const now = this.#now();
    const validUntil = now + graceMs;
    this.#box();
    this.#db.transaction(() => {
      const row = this.#keyRow(keyId);
      if (row.revoked_at !== null) throw new ControlPlaneError(`key ${keyId} is revoked; create a new key instead`);
      const current = this.#box().open(row.secret_sealed, secretAad(keyId));
      this.#db
        .prepare(
          `UPDATE signing_keys SET secret_sealed = ?, rotated_at = ?, previous_secret_sealed = ?, previous_valid_until = ?
           WHERE key_id = ?`,
        )
        .run(this.#box().seal(secret, secretAad(keyId)), now, this.#box().seal(current, previousAad(keyId)), validUntil, keyId);
      this.#bump();
    })();
    return { keyId, secret, previousSecretValidUntil: validUntil };
  }

  async revokeKey(keyId: string): Promise<KeyRecord> {
    return this.#db.transaction(() => {
      const row = this.#keyRow(keyId);
      if (row.revoked_at === null) {
        this.#db.prepare('UPDATE signing_keys SET revoked_at = ? WHERE key_id = ?').run(this.#now(), keyId);
        this.#bump();
      }
      return this.#keyRecord(this.#keyRow(keyId));
    })();
  }

  async listKeys(): Promise<KeyRecord[]> {
    const rows = this.#db.prepare('SELECT * FROM signing_keys ORDER BY created_at, key_id').all() as KeyRow[];
    return rows.map((row) => this.#keyRecord(row));
  }

  async revealSecret(keyId: string): Promise<string> {
    return this.#box().open(this.#keyRow(keyId).secret_sealed, secretAad(keyId));
  }

  async addGrant(keyId: string, dataSetId: string): Promise<void> {
    this.#db.transaction(() => {
      this.#keyRow(keyId);
      this.#requireDataSet(dataSetId);
      const result = this.#db
        .prepare('INSERT OR IGNORE INTO grants (key_id, data_set_id, created_at) VALUES (?, ?, ?)')
        .run(keyId, dataSetId, this.#now());
      if (result.changes > 0) this.#bump();
    })();
  }

  async removeGrant(keyId: string, dataSetId: string): Promise<void> {
    this.#db.transaction(() => {
      this.#keyRow(keyId);
      const result = this.#db.prepare('DELETE FROM grants WHERE key_id = ? AND data_set_id = ?').run(keyId, dataSetId);
      if (result.changes === 0) throw new ControlPlaneError(`key ${keyId} has no grant for data set ${dataSetId}`);
      this.#bump();
    })();
  }

  async version(): Promise<number> {
    return (this.#db.prepare('SELECT version FROM control_meta WHERE id = 1').get() as { version: number }).version;
  }

  async loadSnapshot(): Promise<CredentialSnapshot> {
    this.#box();
    return this.#db.transaction(() => {
      const version = (this.#db.prepare('SELECT version FROM control_meta WHERE id = 1').get() as { version: number }).version;
      const dataSets = new Map<string, DataSetRecord>();
      for (const record of (this.#db.prepare('SELECT id FROM data_sets').all() as { id: string }[]).map((r) =>
        this.#requireDataSet(r.id),
      )) {
        dataSets.set(record.id, record);
      }
      const grants = new Map<string, Set<string>>();
      for (const grant of this.#db.prepare('SELECT key_id, data_set_id FROM grants').all() as {
        key_id: string;
        data_set_id: string;
      }[]) {
        let set = grants.get(grant.key_id);
        if (!set) grants.set(grant.key_id, (set = new Set()));
        set.add(grant.data_set_id);
      }
      const keys = new Map<string, ActiveKey>();
      for (const row of this.#db.prepare('SELECT * FROM signing_keys').all() as KeyRow[]) {
        const hmacKey = (secret: string) => createSecretKey(Buffer.from(secret, 'utf8'));
        keys.set(row.key_id, {
          keyId: row.key_id,
          revoked: row.revoked_at !== null,
          current: hmacKey(this.#box().open(row.secret_sealed, secretAad(row.key_id))),
          previous:
            row.previous_secret_sealed && row.previous_valid_until !== null
              ? {
                  key: hmacKey(this.#box().open(row.previous_secret_sealed, previousAad(row.key_id))),
                  validUntil: row.previous_valid_until,
                }
              : null,
          dataSets: grants.get(row.key_id) ?? new Set(),
        });
      }
      return { version, keys, dataSets };
    })();
  }

  async close(): Promise<void> {
    this.#db.close();
  }
}
