/**
 * The durable queue as the request path sees it. Nothing here knows about SQLite or PostgreSQL.
 *
 * Acknowledgement rule: `append` resolves only after the events are durable (committed and synced);
 * it rejects with QueueUnavailableError when they are not, in which case none of them count as
 * accepted and the sender may retry (records merge on (data_set_id, id) downstream).
 * See DESIGN.md beside this file for redelivery and ordering.
 */
import type { EventPolicyMeta } from '../events/event-outcome.js';

/** The accepted events of one request. All belong to the request's data set. */
export interface QueueAppend {
  readonly requestId: string;
  readonly keyId: string;
  readonly dataSetId: string;
  /** Milliseconds since the epoch at which the request arrived. */
  readonly receivedAt: number;
  readonly policyVersion: number;
  /**
   * The data set's merge window under that policy (milliseconds), queued with the events so that the
   * consumer decides a re-send by the window it was accepted under, a function of the queue alone
   * (consumer/record-merge.ts; every part of the sharded layout decides it alike).
   */
  readonly mergeWindowMs: number;
  readonly events: readonly Record<string, unknown>[];
  /** Parallel to `events`; undefined where policy changed nothing. */
  readonly metas: readonly (EventPolicyMeta | undefined)[];
  /**
   * The request body (UTF-8 JSON, BOM removed), given only when every event of the request was
   * accepted exactly as sent. A store may keep these bytes instead of serializing `events`: they
   * parse to the same events. The store may take ownership of the bytes (transfer them to another
   * thread); the caller must not use them after append().
   */
  readonly rawBody?: Uint8Array;
}

/** Event i of the append has sequence number `firstSeq + i`. */
export interface AppendReceipt {
  readonly firstSeq: number;
  readonly count: number;
}

export interface QueueRecord {
  readonly seq: number;
  readonly received_at: number;
  readonly data_set_id: string;
  readonly key_id: string;
  readonly request_id: string;
  readonly policy_version: number;
  /**
   * The merge window the event was accepted under (QueueAppend.mergeWindowMs); null for events
   * queued before queues kept it, which the consumer decides by the window it has when applying.
   */
  readonly merge_window_ms?: number | null;
  readonly event: Record<string, unknown>;
  readonly meta?: EventPolicyMeta;
}

export interface ReadOptions {
  /** First sequence number wanted (inclusive). */
  readonly fromSeq: number;
  readonly limit: number;
  readonly dataSetId?: string;
}

export interface QueueHealth {
  /** False after a failed commit, until a commit succeeds again. */
  readonly writable: boolean;
  readonly lastError: string | null;
}

export interface EventQueue {
  append(batch: QueueAppend): Promise<AppendReceipt>;
  read(options: ReadOptions): Promise<QueueRecord[]>;
  health(): QueueHealth;
  /** Flushes what was appended and releases the store. */
  close(): Promise<void>;
}

/** Observes commits, for metrics and readiness. Called on the serving thread. */
export interface QueueCommitObserver {
  onCommit(info: { readonly requests: number; readonly events: number; readonly durationMs: number }): void;
  onFailure(info: { readonly requests: number; readonly events: number }): void;
  /** Health changed: the first failure, or the first success after failures (including a probe). */
  onHealth(health: QueueHealth): void;
}
