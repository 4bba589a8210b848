/**
 * How far the merged-view consumer is behind the queue, as `worker status`, the console and the
 * admin /metrics report it. Every backend's QueueReader computes it with lagOf from its own
 * position and queue head, so the figures mean the same on both profiles.
 */
export interface ConsumerLag {
  /** Next sequence number the consumer will apply. */
  readonly next_seq: number;
  /** Last sequence number in the queue (0 when empty). */
  readonly queue_last_seq: number;
  /** Records queued but not yet applied. */
  readonly lag_records: number;
  /** Age of the oldest record not yet applied (0 when caught up). */
  readonly lag_seconds: number;
}

export function lagOf(nextSeq: number, queue: { lastSeq: number; receivedAt: number | null }, nowMs: number): ConsumerLag {
  const lagRecords = Math.max(0, queue.lastSeq - nextSeq + 1);
  const lagSeconds = lagRecords > 0 && queue.receivedAt !== null ? Math.max(0, (nowMs - queue.receivedAt) / 1000) : 0;
  return { next_seq: nextSeq, queue_last_seq: queue.lastSeq, lag_records: lagRecords, lag_seconds: Math.round(lagSeconds * 1000) / 1000 };
}
