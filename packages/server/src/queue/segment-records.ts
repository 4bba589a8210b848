/**
 * The storage-independent half of reading the queue: a stored segment (one accepted request)
 * expanded into one QueueRecord per event. Both stores keep the same segment layout (see DESIGN.md),
 * so they share this code and cannot drift apart in what a record looks like.
 */
import type { QueueRecord } from './event-queue.js';

const hasOwn = Object.prototype.hasOwnProperty;

/** The events of a segment: a JSON array (string), or the request body as received (bytes). */
export function segmentEvents(stored: string | Buffer): Record<string, unknown>[] {
  if (typeof stored === 'string') return JSON.parse(stored) as Record<string, unknown>[];
  return segmentEventsOfText(stored.toString('utf8'), true);
}

/**
 * The events of a segment whose stored form is text either way (PostgreSQL's `events` column):
 * `body` says whether it is the request body as received or a JSON array of events. Parsed from
 * the driver's string as it is: a round trip through a Buffer would copy and decode the whole
 * segment twice more (it did, before issue 30's seventh round: ~18 µs per event of the driver's
 * `Buffer.toString` on a 1,000-event segment read by two lanes).
 */
export function segmentEventsOfText(text: string, body: boolean): Record<string, unknown>[] {
  if (!body) return JSON.parse(text) as Record<string, unknown>[];
  const parsed = JSON.parse(text) as Record<string, unknown>;
  return hasOwn.call(parsed, 'events') ? (parsed.events as Record<string, unknown>[]) : [parsed];
}

export interface SegmentHeader {
  readonly first_seq: number;
  readonly received_at: number;
  readonly data_set_id: string;
  readonly key_id: string;
  readonly request_id: string;
  readonly policy_version: number;
  /** NULL (or absent: a SQLite file no writer of this version has opened) for segments queued before the column. */
  readonly merge_window_ms?: number | null;
}

/**
 * Appends the records of one segment with a sequence number of at least `fromSeq` to `records`.
 * Returns true as soon as `records` holds `limit` records (the caller stops reading).
 */
export function appendSegmentRecords(
  records: QueueRecord[],
  segment: SegmentHeader,
  events: readonly Record<string, unknown>[],
  metasJson: string | null,
  fromSeq: number,
  limit: number,
): boolean {
  const metas = metasJson === null ? null : (JSON.parse(metasJson) as (QueueRecord['meta'] | null)[]);
  const mergeWindow = segment.merge_window_ms ?? null;
  for (let i = 0; i < events.length; i++) {
    const seq = segment.first_seq + i;
    if (seq < fromSeq) continue;
    // Erased (lifecycle/sqlite-queue-eraser.ts, `identities forget`, `events delete`): the sequence
    // number stays taken, no reader sees the event.
    if (events[i] === null) continue;
    const meta = metas?.[i];
    records.push({
      seq,
      received_at: segment.received_at,
      data_set_id: segment.data_set_id,
      key_id: segment.key_id,
      request_id: segment.request_id,
      policy_version: segment.policy_version,
      merge_window_ms: mergeWindow,
      event: events[i]!,
      ...(meta ? { meta } : {}),
    });
    if (records.length >= limit) return true;
  }
  return false;
}
