/**
 * The control plane on PostgreSQL: the same tables, rules and secret sealing as
 * SqliteControlPlane (the reference implementation), shared by every node of a cluster and by
 * the CLI on any machine. Every mutation bumps `control_meta.version` in its transaction; nodes
 * poll the version (one indexed read per node per second) and reload their snapshot when it
 * moved, so a change made anywhere reaches every node within about a second.
 */
import { createSecretKey } from 'node:crypto';
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
import { inTransaction, type Pool, type PoolClient } from '../storage/postgres/database.js';

interface KeyRow {
  key_id: string;
  secret_sealed: Buffer;
  created_at: number;
  rotated_at: number | null;
  previous_secret_sealed: Buffer | null;
  previous_valid_until: number | null;
  revoked_at: number | null;
}

interface DataSetRow {
  id: string;
  created_at: number;
  policy: string;
  limits: string | null;
}

type Queryable = Pick<PoolClient, 'query'>;


function recordOf(row: DataSetRow): DataSetRecord {
  return {
    id: row.id,
    createdAt: row.created_at,
    policy: policyFromStored(row.policy),
    limits: Object.freeze({ ...DEFAULT_LIMITS, ...(row.limits ? JSON.parse(row.limits) : {}) }),
  };
}

export class PostgresControlPlane implements ControlPlane {
  readonly #pool: Pool;
  readonly #keySource: MasterKeySource;
  readonly #name: string;
  #unlocked: Promise<SecretBox> | null = null;
  readonly #now: () => number;

  /**
   * `keys`: a SecretBox, or the loader of this node's master key, checked against the fingerprint
   * stored in the database when a secret is first sealed or opened: every node must use the same key.
   */
  constructor(pool: Pool, keys: MasterKeySource, now: () => number = Date.now, options: { name?: string } = {}) {
    this.#pool = pool;
    this.#keySource = keys;
    this.#name = options.name ?? 'PostgreSQL';
    this.#now = now;
  }

  #box(): Promise<SecretBox> {
    this.#unlocked ??= this.#unlock().catch((error: unknown) => {
      this.#unlocked = null;
      throw error;
    });
    return this.#unlocked;
  }

  async #unlock(): Promise<SecretBox> {
    const fingerprint = async () =>
      (await this.#pool.query<{ f: string | null }>('SELECT master_key_fingerprint AS f FROM control_meta WHERE id = 1')).rows[0]!.f;
    const stored = await fingerprint();
    const sample = (await this.#pool.query<{ key_id: string; secret_sealed: Buffer }>(
      'SELECT key_id, secret_sealed FROM signing_keys ORDER BY created_at, key_id LIMIT 1',
    )).rows[0];
    const box = unlockSecretBox(
      this.#keySource,
      { fingerprint: stored, sample: sample ? { sealed: sample.secret_sealed, aad: secretAad(sample.key_id) } : null },
      this.#name,
    );
    if (stored === null) {
      await this.#pool.query('UPDATE control_meta SET master_key_fingerprint = $1 WHERE id = 1 AND master_key_fingerprint IS NULL', [box.fingerprint()]);
      if (!box.matches((await fingerprint())!)) throw masterKeyMismatch('the master key in use', this.#name);
    }
    return box;
  }

  /** Loads this node's master key and checks it against the database (serve calls it at start). */
  async verifyMasterKey(): Promise<void> {
    await this.#box();
  }

  async #bump(db: Queryable): Promise<void> {
    await db.query('UPDATE control_meta SET version = version + 1 WHERE id = 1');
  }

  async #dataSet(db: Queryable, id: string, lock = false): Promise<DataSetRecord | undefined> {
    const { rows } = await db.query<DataSetRow>(
      `SELECT id, created_at, policy, limits FROM data_sets WHERE id = $1${lock ? ' FOR UPDATE' : ''}`,
      [id],
    );
    return rows[0] && recordOf(rows[0]);
  }

  async #requireDataSet(db: Queryable, id: string, lock = false): Promise<DataSetRecord> {
    const record = await this.#dataSet(db, id, lock);
    if (!record) throw new ControlPlaneError(`data set ${id} does not exist`);
    return record;
  }

  async #keyRow(db: Queryable, keyId: string, lock = false): Promise<KeyRow> {
    const { rows } = await db.query<KeyRow>(`SELECT * FROM signing_keys WHERE key_id = $1${lock ? ' FOR UPDATE' : ''}`, [keyId]);
    if (!rows[0]) throw new ControlPlaneError(`key ${keyId} does not exist`);
    return rows[0];
  }

  async #keyRecord(db: Queryable, row: KeyRow): Promise<KeyRecord> {
    const { rows } = await db.query<{ data_set_id: string }>(
      'SELECT data_set_id FROM grants WHERE key_id = $1 ORDER BY data_set_id COLLATE "C"',
      [row.key_id],
    );
    return {
      keyId: row.key_id,
      createdAt: row.created_at,
      rotatedAt: row.rotated_at,
      revokedAt: row.revoked_at,
      previousSecretValidUntil: row.previous_valid_until,
      dataSets: rows.map((r) => r.data_set_id),
    };
  }

  async createDataSet(id: string): Promise<DataSetRecord> {
    if (!DATA_SET_ID_PATTERN.test(id)) {
      throw new ControlPlaneError(
        `invalid data set id "${id}": 1-128 characters of letters, digits, '.', '_', ':' or '-', starting with a letter or digit`,
      );
    }
    return inTransaction(this.#pool, async (db) => {
      const { version: _version, ...policy } = DEFAULT_POLICY;
      const inserted = await db.query(
        'INSERT INTO data_sets (id, created_at, policy) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING',
        [id, this.#now(), JSON.stringify({ ...policy, version: 1 })],
      );
      if (inserted.rowCount === 0) throw new ControlPlaneError(`data set ${id} already exists`);
      await this.#bump(db);
      return this.#requireDataSet(db, id);
    });
  }

  async listDataSets(): Promise<DataSetRecord[]> {
    const { rows } = await this.#pool.query<DataSetRow>('SELECT id, created_at, policy, limits FROM data_sets ORDER BY id COLLATE "C"');
    return rows.map(recordOf);
  }

  async setPolicy(dataSetId: string, patch: PolicyPatch): Promise<DataSetRecord> {
    validatePolicyPatch(patch);
    return inTransaction(this.#pool, async (db) => {
      const current = await this.#requireDataSet(db, dataSetId, true);
      const next: DataSetPolicy = { ...current.policy, ...patch, version: current.policy.version + 1 };
      validatePolicyRetention(next);
      await db.query('UPDATE data_sets SET policy = $1 WHERE id = $2', [JSON.stringify(next), dataSetId]);
      await this.#bump(db);
      return this.#requireDataSet(db, dataSetId);
    });
  }

  async setLimits(dataSetId: string, patch: Partial<DataSetLimits>): Promise<DataSetRecord> {
    return inTransaction(this.#pool, async (db) => {
      const current = await this.#requireDataSet(db, dataSetId, true);
      const next = { ...current.limits, ...patch };
      try {
        validateLimits(next);
      } catch (error) {
        throw new ControlPlaneError((error as Error).message);
      }
      const overrides = Object.fromEntries(
        Object.entries(next).filter(([name, value]) => DEFAULT_LIMITS[name as keyof DataSetLimits] !== value),
      );
      await db.query('UPDATE data_sets SET limits = $1 WHERE id = $2', [
        Object.keys(overrides).length > 0 ? JSON.stringify(overrides) : null,
        dataSetId,
      ]);
      await this.#bump(db);
      return this.#requireDataSet(db, dataSetId);
    });
  }

  async createKey(dataSets: readonly string[]): Promise<IssuedKey> {
    if (dataSets.length === 0) throw new ControlPlaneError('a key needs at least one data set (--data-set <id>)');
    const unique = [...new Set(dataSets)].sort();
    const keyId = newKeyId();
    const secret = newSecret();
    const box = await this.#box(); // the master key is loaded and checked before anything is written
    await inTransaction(this.#pool, async (db) => {
      for (const id of unique) await this.#requireDataSet(db, id);
      const now = this.#now();
      await db.query('INSERT INTO signing_keys (key_id, secret_sealed, created_at) VALUES ($1, $2, $3)', [
        keyId,
        box.seal(secret, secretAad(keyId)),
        now,
      ]);
      for (const id of unique) {
        await db.query('INSERT INTO grants (key_id, data_set_id, created_at) VALUES ($1, $2, $3)', [keyId, id, now]);
      }
      await this.#bump(db);
    });
    return { keyId, secret, dataSets: unique };
  }

  async rotateKey(keyId: string, graceMs: number): Promise<RotatedKey> {
    validateRotationGrace(graceMs);
    const secret = newSecret();
    const now = this.#now();
    const validUntil = now + graceMs;
    const box = await this.#box();
    await inTransaction(this.#pool, async (db) => {
      const row = await this.#keyRow(db, keyId, true);
      if (row.revoked_at !== null) throw new ControlPlaneError(`key ${keyId} is revoked; create a new key instead`);
      const current = box.open(row.secret_sealed, secretAad(keyId));
      await db.query(
        `UPDATE signing_keys SET secret_sealed = $1, rotated_at = $2, previous_secret_sealed = $3, previous_valid_until = $4
         WHERE key_id = $5`,
        [box.seal(secret, secretAad(keyId)), now, box.seal(current, previousAad(keyId)), validUntil, keyId],
      );
      await this.#bump(db);
    });
    return { keyId, secret, previousSecretValidUntil: validUntil };
  }

  async revokeKey(keyId: string): Promise<KeyRecord> {
    return inTransaction(this.#pool, async (db) => {
      const row = await this.#keyRow(db, keyId, true);
      if (row.revoked_at === null) {
        await db.query('UPDATE signing_keys SET revoked_at = $1 WHERE key_id = $2', [this.#now(), keyId]);
        await this.#bump(db);
      }
      return this.#keyRecord(db, await this.#keyRow(db, keyId));
    });
  }

  async listKeys(): Promise<KeyRecord[]> {
    const { rows } = await this.#pool.query<KeyRow>('SELECT * FROM signing_keys ORDER BY created_at, key_id COLLATE "C"');
    const records: KeyRecord[] = [];
    for (const row of rows) records.push(await this.#keyRecord(this.#pool, row));
    return records;
  }

  async revealSecret(keyId: string): Promise<string> {
    return (await this.#box()).open((await this.#keyRow(this.#pool, keyId)).secret_sealed, secretAad(keyId));
  }

  async addGrant(keyId: string, dataSetId: string): Promise<void> {
    await inTransaction(this.#pool, async (db) => {
      await this.#keyRow(db, keyId);
      await this.#requireDataSet(db, dataSetId);
      const result = await db.query(
        'INSERT INTO grants (key_id, data_set_id, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING',
        [keyId, dataSetId, this.#now()],
      );
      if ((result.rowCount ?? 0) > 0) await this.#bump(db);
    });
  }

  async removeGrant(keyId: string, dataSetId: string): Promise<void> {
    await inTransaction(this.#pool, async (db) => {
      await this.#keyRow(db, keyId);
      const result = await db.query('DELETE FROM grants WHERE key_id = $1 AND data_set_id = $2', [keyId, dataSetId]);
      if (result.rowCount === 0) throw new ControlPlaneError(`key ${keyId} has no grant for data set ${dataSetId}`);
      await this.#bump(db);
    });
  }

  async version(): Promise<number> {
    const { rows } = await this.#pool.query<{ version: number }>('SELECT version FROM control_meta WHERE id = 1');
    return rows[0]!.version;
  }

  async loadSnapshot(): Promise<CredentialSnapshot> {
    const box = await this.#box();
    // One REPEATABLE READ transaction: the version and the rows it describes are one point in time.
    return inTransaction(
      this.#pool,
      async (db) => {
        const version = (await db.query<{ version: number }>('SELECT version FROM control_meta WHERE id = 1')).rows[0]!.version;
        const dataSets = new Map<string, DataSetRecord>();
        for (const row of (await db.query<DataSetRow>('SELECT id, created_at, policy, limits FROM data_sets')).rows) {
          dataSets.set(row.id, recordOf(row));
        }
        const grants = new Map<string, Set<string>>();
        for (const grant of (await db.query<{ key_id: string; data_set_id: string }>('SELECT key_id, data_set_id FROM grants')).rows) {
          let set = grants.get(grant.key_id);
          if (!set) grants.set(grant.key_id, (set = new Set()));
          set.add(grant.data_set_id);
        }
        const keys = new Map<string, ActiveKey>();
        const hmacKey = (secret: string) => createSecretKey(Buffer.from(secret, 'utf8'));
        for (const row of (await db.query<KeyRow>('SELECT * FROM signing_keys')).rows) {
          keys.set(row.key_id, {
            keyId: row.key_id,
            revoked: row.revoked_at !== null,
            current: hmacKey(box.open(row.secret_sealed, secretAad(row.key_id))),
            previous:
              row.previous_secret_sealed && row.previous_valid_until !== null
                ? { key: hmacKey(box.open(row.previous_secret_sealed, previousAad(row.key_id))), validUntil: row.previous_valid_until }
                : null,
            dataSets: grants.get(row.key_id) ?? new Set(),
          });
        }
        return { version, keys, dataSets };
      },
      'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY',
    );
  }

  async close(): Promise<void> {
    // The pool belongs to the storage that created this control plane.
  }
}
