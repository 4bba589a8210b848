/**
 * The control plane: data sets, signing keys, grants and per-data-set policy.
 *
 * Two audiences with different needs:
 * - Operators (the CLI) mutate it. Every mutation bumps `version` in the same transaction.
 * - The request path never queries it per request. A server holds an immutable CredentialSnapshot in
 *   memory, polls `version()` about once a second and swaps in a fresh snapshot when it changed.
 *   That is how revocation, grants and policy reach a running server within seconds with no restart,
 *   while the hot path stays a couple of Map lookups.
 *
 * The interface is async and storage-agnostic. Its one implementation, ControlPlaneService
 * (control-plane-service.ts), holds every rule once over a row-level ControlStore per backend
 * (sqlite-control-store.ts, postgres-control-store.ts), so the profiles cannot drift apart.
 */
import type { KeyObject } from 'node:crypto';
import type { DataSetPolicy, PolicyPatch } from './data-set-policy.js';
import type { DataSetLimits } from '../rate-limit/data-set-limits.js';

export interface DataSetRecord {
  readonly id: string;
  readonly createdAt: number;
  readonly policy: DataSetPolicy;
  /** Effective rate limits: the defaults overlaid with this data set's overrides. */
  readonly limits: DataSetLimits;
}

export interface KeyRecord {
  readonly keyId: string;
  readonly createdAt: number;
  readonly rotatedAt: number | null;
  readonly revokedAt: number | null;
  /** Until when the secret before the last rotation still verifies (ms), or null. */
  readonly previousSecretValidUntil: number | null;
  readonly dataSets: readonly string[];
}

export interface IssuedKey {
  readonly keyId: string;
  readonly secret: string;
  readonly dataSets: readonly string[];
}

export interface RotatedKey {
  readonly keyId: string;
  readonly secret: string;
  readonly previousSecretValidUntil: number;
}

/** A policy change (fields and bounds: data-set-policy.ts). */
export type { PolicyPatch };

/** A key as the request path sees it: HMAC keys ready to use, grants as a Set. */
export interface ActiveKey {
  readonly keyId: string;
  readonly revoked: boolean;
  readonly current: KeyObject;
  readonly previous: { readonly key: KeyObject; readonly validUntil: number } | null;
  readonly dataSets: ReadonlySet<string>;
}

export interface CredentialSnapshot {
  readonly version: number;
  readonly keys: ReadonlyMap<string, ActiveKey>;
  readonly dataSets: ReadonlyMap<string, DataSetRecord>;
}

export interface ControlPlane {
  createDataSet(id: string): Promise<DataSetRecord>;
  listDataSets(): Promise<DataSetRecord[]>;
  setPolicy(dataSetId: string, patch: PolicyPatch): Promise<DataSetRecord>;
  setLimits(dataSetId: string, patch: Partial<DataSetLimits>): Promise<DataSetRecord>;

  createKey(dataSets: readonly string[]): Promise<IssuedKey>;
  rotateKey(keyId: string, graceMs: number): Promise<RotatedKey>;
  revokeKey(keyId: string): Promise<KeyRecord>;
  listKeys(): Promise<KeyRecord[]>;
  /** The plaintext current secret of a key; for local tooling (demo sender), never for display. */
  revealSecret(keyId: string): Promise<string>;

  addGrant(keyId: string, dataSetId: string): Promise<void>;
  removeGrant(keyId: string, dataSetId: string): Promise<void>;

  /**
   * Loads the master key and checks it against the fingerprint stored with the sealed secrets; throws
   * a MasterKeyError (one line: which file or variable, what to do) when it does not match.
   */
  verifyMasterKey(): Promise<void>;
  version(): Promise<number>;
  loadSnapshot(): Promise<CredentialSnapshot>;
  close(): Promise<void>;
}
