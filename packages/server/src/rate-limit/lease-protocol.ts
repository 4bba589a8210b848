/**
 * IPC between the workers of `serve --workers N` and the primary, which holds the authoritative
 * buckets. A worker takes tokens in small leases (about 1% of a second's quota), spends them
 * locally without asking again, and gives back what it did not use within LEASE_TTL_MS. Admission
 * stays exact in count (every token is taken from the one authority) and is shifted in time by at
 * most one lease lifetime. A multi-node cluster can lease from a shared database the same way.
 */
import type { DataSetLimits } from './data-set-limits.js';
import type { BucketView, LimitName } from './data-set-buckets.js';

export const LEASE_TTL_MS = 100;

export interface LeaseRequest {
  readonly type: 'ecapi:rl-take';
  readonly id: number;
  readonly dataSetId: string;
  readonly limits: DataSetLimits;
  /** What the caller needs now; refused unless at least this is available. */
  readonly need: { readonly requests: number; readonly events: number };
  /** What it would like, to serve the next few requests locally. */
  readonly want: { readonly requests: number; readonly events: number };
  /** Unused tokens of expired leases, returned in the same message. */
  readonly giveBack: readonly LeaseGiveBack[];
}

export interface LeaseGiveBack {
  readonly dataSetId: string;
  readonly limits: DataSetLimits;
  readonly requests: number;
  readonly events: number;
  readonly second: number;
}

export interface LeaseReply {
  readonly type: 'ecapi:rl-grant';
  readonly id: number;
  readonly ok: boolean;
  readonly granted: { readonly requests: number; readonly events: number };
  readonly second: number;
  readonly limit?: LimitName;
  readonly retryAfterMs?: number;
  readonly view: BucketView;
}

export interface LeaseReturn {
  readonly type: 'ecapi:rl-return';
  readonly giveBack: readonly LeaseGiveBack[];
}
