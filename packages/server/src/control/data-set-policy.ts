/**
 * Per-data-set privacy and validation policy. Stored in the control plane, changed with
 * `ecapi-ingest data-set policy`, and read by the request path from the in-memory snapshot.
 * `version` increases on every change so that each queued record can say which policy it passed.
 */
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
  readonly version: number;
}

export const DEFAULT_POLICY: DataSetPolicy = Object.freeze({
  consent: 'enforce',
  ip: 'keep',
  piiScan: 'redact',
  maxAgeSeconds: 90 * 24 * 3600,
  mergeWindowMs: 7 * 86_400_000,
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
  if (stored.mergeWindowMs === undefined && typeof mergeWindowSeconds === 'number') {
    return Object.freeze({ ...policy, mergeWindowMs: mergeWindowSeconds * 1000 });
  }
  return Object.freeze(policy);
}
