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
 * The interface is async and storage-agnostic so that a PostgreSQL implementation can replace the
 * embedded SQLite one without the request path noticing.
 */
import type { KeyObject } from 'node:crypto';
import type { DataSetPolicy } from './data-set-policy.js';
import type { DataSetLimits } from '../rate-limit/data-set-limits.js';
import { ControlPlaneError } from '../errors.js';
import { DAY_MS, formatDurationMs } from './duration.js';

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

export type PolicyPatch = Partial<Omit<DataSetPolicy, 'version'>>;

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

export const DATA_SET_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/**
 * Bounds of what the control plane stores, checked by both implementations before their
 * transaction writes anything (issue 16, point 6: `key rotate --grace 100000000d` used to commit a
 * validity past the last representable date, then fail to print it). A rotation grace longer than
 * a year is no grace period but a second permanent secret: revoke and re-issue instead.
 */
export const MAX_ROTATION_GRACE_MS = 365 * DAY_MS;
/** Maximum event age and merge window: ten years. */
export const MAX_POLICY_WINDOW_SECONDS = 3650 * 86_400;

export function validateRotationGrace(graceMs: number): void {
  if (!Number.isSafeInteger(graceMs) || graceMs < 0 || graceMs > MAX_ROTATION_GRACE_MS) {
    throw new ControlPlaneError(`invalid grace period: between 0s and ${formatDurationMs(MAX_ROTATION_GRACE_MS)}`);
  }
}

export function validatePolicyPatch(patch: PolicyPatch): void {
  const maxAge = patch.maxAgeSeconds;
  if (maxAge !== undefined && (!Number.isSafeInteger(maxAge) || maxAge < 1 || maxAge > MAX_POLICY_WINDOW_SECONDS)) {
    throw new ControlPlaneError(`invalid max age: between 1s and ${formatDurationMs(MAX_POLICY_WINDOW_SECONDS * 1000)}`);
  }
  const mergeWindow = patch.mergeWindowMs;
  if (mergeWindow !== undefined && (!Number.isSafeInteger(mergeWindow) || mergeWindow < 0 || mergeWindow > MAX_POLICY_WINDOW_SECONDS * 1000)) {
    throw new ControlPlaneError(`invalid merge window: between 0ms and ${formatDurationMs(MAX_POLICY_WINDOW_SECONDS * 1000)}, in whole milliseconds`);
  }
  const retention = patch.viewRetentionMs;
  if (retention !== undefined && (!Number.isSafeInteger(retention) || retention < 1 || retention > MAX_POLICY_WINDOW_SECONDS * 1000)) {
    throw new ControlPlaneError(`invalid view retention: between 1ms and ${formatDurationMs(MAX_POLICY_WINDOW_SECONDS * 1000)}, in whole milliseconds`);
  }
}

/**
 * A policy after a change: the view retention may not be shorter than the merge window nor the
 * maximum event age. A record deleted earlier could come back as a new record from a late re-send
 * (within the merge window) or from an event still young enough to be accepted (within the maximum
 * age). Checked on the merged policy, so lowering the retention and raising the maximum age are
 * refused alike.
 */
export function validatePolicyRetention(policy: Omit<DataSetPolicy, 'version'>): void {
  const floor = Math.max(policy.mergeWindowMs, policy.maxAgeSeconds * 1000);
  if (policy.viewRetentionMs < floor) {
    throw new ControlPlaneError(
      `invalid view retention ${formatDurationMs(policy.viewRetentionMs)}: it must be at least the merge window (${formatDurationMs(policy.mergeWindowMs)}) ` +
        `and the maximum event age (${formatDurationMs(policy.maxAgeSeconds * 1000)}), so that a late re-send is never taken for a new event; ` +
        'raise --view-retention or lower --merge-window / --max-age',
    );
  }
}
