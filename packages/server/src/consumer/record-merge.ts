/**
 * The merge part of applying a batch: one queued record against the current state of its merged
 * record (docs/guides/merged-view.md "Merge rule" and "Merge window"). Pure: the identity key is filled in by the
 * caller (identity-forest.ts), counters by counter-deltas.ts.
 */
import { identifiersOf } from '../merged-view/identity.js';
import { mergeEvents } from '../merged-view/merge.js';
import type { MergedRecord } from '../merged-view/view-store.js';
import type { PreparedRecord } from './batch-loading.js';

export type MergeStep =
  | { readonly discarded: true }
  | {
      readonly discarded: false;
      /** The merged record, its identity key still that of `existing` (or null). */
      readonly record: MergedRecord;
      /** Identifiers of the merged event. */
      readonly identifiers: readonly string[];
    };

export function mergeStep(existing: MergedRecord | undefined, p: PreparedRecord, mergeWindowMs: number): MergeStep {
  const { record } = p;
  if (existing && record.received_at - existing.firstReceivedAt > mergeWindowMs) return { discarded: true };
  const event = existing ? mergeEvents(existing.event, p.event) : p.event;
  return {
    discarded: false,
    identifiers: existing ? identifiersOf(event) : p.identifiers,
    record: {
      dataSetId: record.data_set_id,
      recordKey: p.key,
      eventId: typeof event.id === 'string' && event.id !== '' ? event.id : null,
      firstSeq: existing?.firstSeq ?? record.seq,
      lastSeq: record.seq,
      firstReceivedAt: existing ? Math.min(existing.firstReceivedAt, record.received_at) : record.received_at,
      lastReceivedAt: existing ? Math.max(existing.lastReceivedAt, record.received_at) : record.received_at,
      mergedCount: (existing?.mergedCount ?? 0) + 1,
      identityKey: existing?.identityKey ?? null,
      measurementOnly: (existing?.measurementOnly ?? false) || p.measurementOnly,
      event,
    },
  };
}
