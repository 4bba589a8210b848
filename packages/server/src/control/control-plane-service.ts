/**
 * The control plane's rules, written once for every backend: id syntax, policy and limit
 * validation, the version bump in the same transaction as every mutation, sealing secrets bound
 * to their key id, the master-key check, and building the request path's CredentialSnapshot.
 * Below it a ControlStore (sqlite-control-store.ts, postgres-control-store.ts) only moves rows.
 *
 * Invariants:
 * - Out-of-range input is refused before a transaction starts: a refused command writes nothing
 *   and bumps no version.
 * - The master key is loaded and checked before any secret is sealed or opened, outside the
 *   write transaction (a wrong key never leaves half a key behind).
 * - A snapshot is read in one read-only transaction, so its version describes exactly its rows.
 */
import { createSecretKey } from 'node:crypto';
import { ControlPlaneError } from '../errors.js';
import { DEFAULT_POLICY, patchedPolicy, policyFromStored, validatePolicyPatch, type PolicyPatch } from './data-set-policy.js';
import { DEFAULT_LIMITS, validateLimits, type DataSetLimits } from '../rate-limit/data-set-limits.js';
import type { ActiveKey, ControlPlane, CredentialSnapshot, DataSetRecord, IssuedKey, KeyRecord, RotatedKey } from './control-plane.js';
import type { ControlRows, ControlStore, DataSetRow, KeyRow } from './control-store.js';
import { DAY_MS, formatDurationMs } from './duration.js';
import { masterKeyMismatch, unlockSecretBox, type MasterKeySource, type SecretBox } from './secret-box.js';
import { newKeyId, newSecret, previousAad, secretAad } from './signing-key-material.js';

export const DATA_SET_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/**
 * A rotation grace longer than a year is no grace period but a second permanent secret: revoke
 * and re-issue instead (issue 16: `key rotate --grace 100000000d` used to commit a validity past
 * the last representable date, then fail to print it).
 */
export const MAX_ROTATION_GRACE_MS = 365 * DAY_MS;

export function validateRotationGrace(graceMs: number): void {
  if (!Number.isSafeInteger(graceMs) || graceMs < 0 || graceMs > MAX_ROTATION_GRACE_MS) {
    throw new ControlPlaneError(`invalid grace period: between 0s and ${formatDurationMs(MAX_ROTATION_GRACE_MS)}`);
  }
}

function validateDataSetId(id: string): void {
  if (!DATA_SET_ID_PATTERN.test(id)) {
    throw new ControlPlaneError(
      `invalid data set id "${id}": 1-128 characters of letters, digits, '.', '_', ':' or '-', starting with a letter or digit`,
    );
  }
}

function dataSetRecord(row: DataSetRow): DataSetRecord {
  return {
    id: row.id,
    createdAt: row.created_at,
    policy: policyFromStored(row.policy),
    limits: Object.freeze({ ...DEFAULT_LIMITS, ...(row.limits ? JSON.parse(row.limits) : {}) }),
  };
}

/** Only what differs from the defaults is stored, so a changed default reaches every data set that never set it. */
function storedLimits(limits: DataSetLimits): string | null {
  const overrides = Object.fromEntries(Object.entries(limits).filter(([name, value]) => DEFAULT_LIMITS[name as keyof DataSetLimits] !== value));
  return Object.keys(overrides).length > 0 ? JSON.stringify(overrides) : null;
}

async function requireDataSet(rows: ControlRows, id: string, forUpdate = false): Promise<DataSetRecord> {
  const row = await rows.dataSet(id, forUpdate);
  if (!row) throw new ControlPlaneError(`data set ${id} does not exist`);
  return dataSetRecord(row);
}

async function requireKey(rows: ControlRows, keyId: string, forUpdate = false): Promise<KeyRow> {
  const row = await rows.key(keyId, forUpdate);
  if (!row) throw new ControlPlaneError(`key ${keyId} does not exist`);
  return row;
}

async function keyRecord(rows: ControlRows, row: KeyRow): Promise<KeyRecord> {
  return {
    keyId: row.key_id,
    createdAt: row.created_at,
    rotatedAt: row.rotated_at,
    revokedAt: row.revoked_at,
    previousSecretValidUntil: row.previous_valid_until,
    dataSets: await rows.grantsOf(row.key_id),
  };
}

export class ControlPlaneService implements ControlPlane {
  readonly #store: ControlStore;
  readonly #keySource: MasterKeySource;
  readonly #now: () => number;
  #unlocked: Promise<SecretBox> | null = null;

  /**
   * `keys`: a SecretBox, or the loader of the master key (read when a secret is first sealed or
   * opened, and checked against the fingerprint the store holds: every process must use the same key).
   */
  constructor(store: ControlStore, keys: MasterKeySource, now: () => number = Date.now) {
    this.#store = store;
    this.#keySource = keys;
    this.#now = now;
  }

  /** The SecretBox, once the master key was loaded and found to be the one this store was sealed with. */
  #box(): Promise<SecretBox> {
    this.#unlocked ??= this.#store.read((rows) => this.#unlock(rows)).catch((error: unknown) => {
      this.#unlocked = null;
      throw error;
    });
    return this.#unlocked;
  }

  async #unlock(rows: ControlRows): Promise<SecretBox> {
    const stored = await rows.masterKeyFingerprint();
    const sample = await rows.sampleSealedSecret();
    const box = unlockSecretBox(
      this.#keySource,
      {
        fingerprint: stored,
        sample: sample ? { sealed: sample.secret_sealed, aad: secretAad(sample.key_id) } : null,
        sealedElsewhere: stored === null && !sample && this.#store.sealedElsewhere(),
      },
      this.#store.name,
    );
    if (stored === null) {
      // The first key to seal or open here; another process may store one at the same moment.
      await rows.claimMasterKeyFingerprint(box.fingerprint());
      if (!box.matches((await rows.masterKeyFingerprint())!)) throw masterKeyMismatch('the master key in use', this.#store.name);
    }
    return box;
  }

  async verifyMasterKey(): Promise<void> {
    await this.#box();
  }

  async createDataSet(id: string): Promise<DataSetRecord> {
    validateDataSetId(id);
    return this.#store.transaction(async (rows) => {
      const { version: _version, ...policy } = DEFAULT_POLICY;
      const inserted = await rows.insertDataSet({ id, created_at: this.#now(), policy: JSON.stringify({ ...policy, version: 1 }), limits: null });
      if (!inserted) throw new ControlPlaneError(`data set ${id} already exists`);
      await rows.bumpVersion();
      return requireDataSet(rows, id);
    });
  }

  async listDataSets(): Promise<DataSetRecord[]> {
    return (await this.#store.read((rows) => rows.dataSets())).map(dataSetRecord);
  }

  async setPolicy(dataSetId: string, patch: PolicyPatch): Promise<DataSetRecord> {
    validatePolicyPatch(patch);
    return this.#store.transaction(async (rows) => {
      const current = await requireDataSet(rows, dataSetId, true);
      await rows.updateDataSet(dataSetId, { policy: JSON.stringify(patchedPolicy(current.policy, patch)) });
      await rows.bumpVersion();
      return requireDataSet(rows, dataSetId);
    });
  }

  async setLimits(dataSetId: string, patch: Partial<DataSetLimits>): Promise<DataSetRecord> {
    return this.#store.transaction(async (rows) => {
      const current = await requireDataSet(rows, dataSetId, true);
      const next = { ...current.limits, ...patch };
      try {
        validateLimits(next);
      } catch (error) {
        throw new ControlPlaneError((error as Error).message);
      }
      await rows.updateDataSet(dataSetId, { limits: storedLimits(next) });
      await rows.bumpVersion();
      return requireDataSet(rows, dataSetId);
    });
  }

  async createKey(dataSets: readonly string[]): Promise<IssuedKey> {
    if (dataSets.length === 0) throw new ControlPlaneError('a key needs at least one data set (--data-set <id>)');
    const unique = [...new Set(dataSets)].sort();
    const keyId = newKeyId();
    const secret = newSecret();
    const box = await this.#box(); // the master key is loaded and checked before anything is written
    await this.#store.transaction(async (rows) => {
      for (const id of unique) await requireDataSet(rows, id);
      const now = this.#now();
      await rows.insertKey({ key_id: keyId, secret_sealed: box.seal(secret, secretAad(keyId)), created_at: now });
      for (const id of unique) await rows.insertGrant(keyId, id, now);
      await rows.bumpVersion();
    });
    return { keyId, secret, dataSets: unique };
  }

  async rotateKey(keyId: string, graceMs: number): Promise<RotatedKey> {
    validateRotationGrace(graceMs);
    const secret = newSecret();
    const now = this.#now();
    const validUntil = now + graceMs;
    const box = await this.#box();
    await this.#store.transaction(async (rows) => {
      const row = await requireKey(rows, keyId, true);
      if (row.revoked_at !== null) throw new ControlPlaneError(`key ${keyId} is revoked; create a new key instead`);
      const current = box.open(row.secret_sealed, secretAad(keyId));
      await rows.updateKey(keyId, {
        secret_sealed: box.seal(secret, secretAad(keyId)),
        rotated_at: now,
        previous_secret_sealed: box.seal(current, previousAad(keyId)),
        previous_valid_until: validUntil,
      });
      await rows.bumpVersion();
    });
    return { keyId, secret, previousSecretValidUntil: validUntil };
  }

  async revokeKey(keyId: string): Promise<KeyRecord> {
    return this.#store.transaction(async (rows) => {
      const row = await requireKey(rows, keyId, true);
      if (row.revoked_at === null) {
        await rows.updateKey(keyId, { revoked_at: this.#now() });
        await rows.bumpVersion();
      }
      return keyRecord(rows, await requireKey(rows, keyId));
    });
  }

  async listKeys(): Promise<KeyRecord[]> {
    return this.#store.read(async (rows) => {
      const records: KeyRecord[] = [];
      for (const row of await rows.keys()) records.push(await keyRecord(rows, row));
      return records;
    });
  }

  async revealSecret(keyId: string): Promise<string> {
    const box = await this.#box();
    return box.open((await this.#store.read((rows) => requireKey(rows, keyId))).secret_sealed, secretAad(keyId));
  }

  async addGrant(keyId: string, dataSetId: string): Promise<void> {
    await this.#store.transaction(async (rows) => {
      await requireKey(rows, keyId);
      await requireDataSet(rows, dataSetId);
      if (await rows.insertGrant(keyId, dataSetId, this.#now())) await rows.bumpVersion();
    });
  }

  async removeGrant(keyId: string, dataSetId: string): Promise<void> {
    await this.#store.transaction(async (rows) => {
      await requireKey(rows, keyId);
      if (!(await rows.deleteGrant(keyId, dataSetId))) throw new ControlPlaneError(`key ${keyId} has no grant for data set ${dataSetId}`);
      await rows.bumpVersion();
    });
  }

  async version(): Promise<number> {
    return this.#store.read((rows) => rows.version());
  }

  async loadSnapshot(): Promise<CredentialSnapshot> {
    const box = await this.#box();
    return this.#store.transaction(async (rows) => {
      const version = await rows.version();
      const dataSets = new Map<string, DataSetRecord>();
      for (const row of await rows.dataSets()) dataSets.set(row.id, dataSetRecord(row));
      const grants = new Map<string, Set<string>>();
      for (const grant of await rows.grants()) {
        let set = grants.get(grant.key_id);
        if (!set) grants.set(grant.key_id, (set = new Set()));
        set.add(grant.data_set_id);
      }
      const hmacKey = (secret: string) => createSecretKey(Buffer.from(secret, 'utf8'));
      const keys = new Map<string, ActiveKey>();
      for (const row of await rows.keys()) {
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
    }, 'snapshot');
  }

  async close(): Promise<void> {
    await this.#store.close();
  }
}
