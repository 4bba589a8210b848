/**
 * The row-level store under the control plane: what one backend must do, and nothing more.
 *
 * Every rule (id syntax, policy and limit validation, version bumps, sealing, snapshot building)
 * lives once in ControlPlaneService. A store only moves rows: it runs a unit of work in one
 * transaction and reads or writes the four tables (control_meta, data_sets, signing_keys, grants)
 * with its own SQL. Ordering is part of the contract (byte order of ids), so both backends list
 * the same things in the same order.
 */

export interface DataSetRow {
  readonly id: string;
  readonly created_at: number;
  /** The policy as JSON text (see policyFromStored). */
  readonly policy: string;
  /** The limit overrides as JSON text, or null when the data set uses the defaults. */
  readonly limits: string | null;
}

export interface KeyRow {
  readonly key_id: string;
  readonly secret_sealed: Buffer;
  readonly created_at: number;
  readonly rotated_at: number | null;
  readonly previous_secret_sealed: Buffer | null;
  readonly previous_valid_until: number | null;
  readonly revoked_at: number | null;
}

export interface GrantRow {
  readonly key_id: string;
  readonly data_set_id: string;
}

/** Row operations inside one unit of work. `forUpdate`: lock the row until the transaction ends. */
export interface ControlRows {
  version(): Promise<number>;
  bumpVersion(): Promise<void>;

  dataSet(id: string, forUpdate?: boolean): Promise<DataSetRow | undefined>;
  /** All data sets, by id in byte order. */
  dataSets(): Promise<DataSetRow[]>;
  /** False (and nothing written) when a data set with this id exists. */
  insertDataSet(row: DataSetRow): Promise<boolean>;
  updateDataSet(id: string, columns: { policy?: string; limits?: string | null }): Promise<void>;

  key(keyId: string, forUpdate?: boolean): Promise<KeyRow | undefined>;
  /** All keys, by creation time then key id. */
  keys(): Promise<KeyRow[]>;
  insertKey(row: Pick<KeyRow, 'key_id' | 'secret_sealed' | 'created_at'>): Promise<void>;
  updateKey(keyId: string, columns: Partial<Omit<KeyRow, 'key_id' | 'created_at'>>): Promise<void>;

  /** The data sets a key is granted, in byte order. */
  grantsOf(keyId: string): Promise<string[]>;
  grants(): Promise<GrantRow[]>;
  /** False when the grant already existed. */
  insertGrant(keyId: string, dataSetId: string, createdAt: number): Promise<boolean>;
  /** False when there was no such grant. */
  deleteGrant(keyId: string, dataSetId: string): Promise<boolean>;

  masterKeyFingerprint(): Promise<string | null>;
  /** Stores the fingerprint unless one is stored already (another process may race us). */
  claimMasterKeyFingerprint(fingerprint: string): Promise<void>;
  /** One sealed secret (the oldest key's), to check a master key against stores from before fingerprints. */
  sampleSealedSecret(): Promise<Pick<KeyRow, 'key_id' | 'secret_sealed'> | undefined>;
}

export interface ControlStore {
  /** Names the store in messages about the master key (a file path, a PostgreSQL schema). */
  readonly name: string;
  /**
   * Runs `work` in one transaction: committed when it resolves, rolled back when it throws.
   * `snapshot`: a read-only transaction whose reads all see one point in time.
   */
  transaction<T>(work: (rows: ControlRows) => Promise<T>, mode?: 'write' | 'snapshot'): Promise<T>;
  /** Runs `work` outside a transaction (single reads: the version poll, listings). */
  read<T>(work: (rows: ControlRows) => Promise<T>): Promise<T>;
  /** Whether another control plane sharing this one's master key file holds secrets. */
  sealedElsewhere(): boolean;
  close(): Promise<void>;
}

/** Columns an update may set, per table (names from code, never from input). */
export const UPDATABLE_COLUMNS = {
  data_sets: new Set(['policy', 'limits']),
  signing_keys: new Set(['secret_sealed', 'rotated_at', 'previous_secret_sealed', 'previous_valid_until', 'revoked_at']),
} as const;

/** The columns of an update that are set (undefined ones are left alone), checked against the table's. */
export function updatedColumns(table: keyof typeof UPDATABLE_COLUMNS, columns: object): { names: string[]; values: unknown[] } {
  const entries = Object.entries(columns).filter(([, value]) => value !== undefined);
  for (const [name] of entries) if (!UPDATABLE_COLUMNS[table].has(name)) throw new Error(`not an updatable column of ${table}: ${name}`);
  return { names: entries.map(([name]) => name), values: entries.map(([, value]) => value) };
}
