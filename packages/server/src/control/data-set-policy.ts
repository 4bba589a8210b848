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
  /** Record update window of the merged view (issue: asynchronous side). */
  readonly mergeWindowSeconds: number;
  readonly version: number;
}

export const DEFAULT_POLICY: DataSetPolicy = Object.freeze({
  consent: 'enforce',
  ip: 'keep',
  piiScan: 'redact',
  maxAgeSeconds: 90 * 24 * 3600,
  mergeWindowSeconds: 7 * 24 * 3600,
  version: 1,
});
