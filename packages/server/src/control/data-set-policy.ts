/**
 * Per-data-set privacy and validation policy. Stored in the control plane, changed with
 * `ecapi-ingest data-set policy`, and read by the request path from the in-memory snapshot.
 * `version` increases on every change so that each queued record can say which policy it passed.
 *
 * Adding a policy field is this file only: the field and its default below, its bounds in
 * validatePolicyPatch, and (when stored policies may lack or rename it) policyFromStored.
 * ControlPlaneService applies patches on every backend; the CLI's `data-set policy` sets it.
 */
import { ControlPlaneError } from '../errors.js';
import { formatDurationMs } from './duration.js';

export type ConsentMode = 'enforce' | 'reject' | 'off';
export type IpMode = 'keep' | 'truncate' | 'drop';
export type PiiScanMode = 'redact' | 'reject' | 'off';

export interface DataSetPolicy {
  readonly consent: ConsentMode;
  readonly ip: IpMode;
  readonly piiScan: PiiScanMode;
  /** Events older than this (by `timestamp`) are rejected. */
  readonly maxAgeSeconds: number;
  /**
   * Record update window of the merged view, in milliseconds: kept exactly, so `500ms` is 500 and
   * `1500ms` is 1500 (policies stored before this field held whole `mergeWindowSeconds`).
   */
  readonly mergeWindowMs: number;
  /**
   * Retention of the merged view, in milliseconds: records whose last update is older are deleted
   * by the worker (lifecycle/lifecycle-runner.ts). Never shorter than the merge window nor the maximum
   * event age (validatePolicyRetention), so that a late re-send is never taken for a new event.
   */
  readonly viewRetentionMs: number;
  readonly version: number;
}

export const DEFAULT_POLICY: DataSetPolicy = Object.freeze({
  consent: 'enforce',
  ip: 'keep',
  piiScan: 'redact',
  maxAgeSeconds: 90 * 24 * 3600,
  mergeWindowMs: 7 * 86_400_000,
  // 180 days: twice the default maximum event age, so a conversion can be matched against
  // everything of the last ~6 months (beyond common 90-day attribution windows); hourly statistics,
  // which hold no identifiers, are kept beyond it. docs/guides/data-lifecycle.md.
  viewRetentionMs: 180 * 86_400_000,
  version: 1,
});

/**
 * A policy as stored (JSON text in control.db or PostgreSQL's data_sets.policy), with the defaults
 * for fields it lacks. Policies written before the merge window was kept in milliseconds carry
 * `mergeWindowSeconds` (whole seconds) instead: it is converted, never lost.
 */
export function policyFromStored(json: string): DataSetPolicy {
  const { mergeWindowSeconds, ...stored } = JSON.parse(json) as Partial<DataSetPolicy> & { mergeWindowSeconds?: number };
  const policy: DataSetPolicy = { ...DEFAULT_POLICY, ...stored };
  // Stored before the view had a retention: the default, or longer where the policy's merge window or
  // maximum age needs it (validatePolicyRetention), so that older policies stay valid.
  if (stored.viewRetentionMs === undefined) {
    const mergeWindowMs = stored.mergeWindowMs ?? (typeof mergeWindowSeconds === 'number' ? mergeWindowSeconds * 1000 : policy.mergeWindowMs);
    (policy as { viewRetentionMs: number }).viewRetentionMs = Math.max(DEFAULT_POLICY.viewRetentionMs, mergeWindowMs, policy.maxAgeSeconds * 1000);
  }
  if (stored.mergeWindowMs === undefined && typeof mergeWindowSeconds === 'number') {
    return Object.freeze({ ...policy, mergeWindowMs: mergeWindowSeconds * 1000 });
  }
  return Object.freeze(policy);
}

export type PolicyPatch = Partial<Omit<DataSetPolicy, 'version'>>;

/** Maximum event age and merge window: ten years. */
export const MAX_POLICY_WINDOW_SECONDS = 3650 * 86_400;

/** Refuses out-of-range fields before anything is written (a ControlPlaneError naming the bounds). */
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
 * age). Checked on the patched policy, so lowering the retention and raising the maximum age are
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

/** The next version of a policy: the patch applied (its retention checked), the version bumped. */
export function patchedPolicy(current: DataSetPolicy, patch: PolicyPatch): DataSetPolicy {
  const next = { ...current, ...patch, version: current.version + 1 };
  validatePolicyRetention(next);
  return next;
}
