/**
 * Applies a batch of queue records to the merged view, identities and view counters, inside one
 * view transaction. Store-agnostic, in four named parts:
 * 1. batch loading (batch-loading.ts): decode each record once, then one bulk read per kind of
 *    everything the batch touches (records, identifier links, identity nodes);
 * 2. merge (record-merge.ts): per record, in queue order, against the current state of its key:
 *    discard after the merge window, or merge. Duplicates of a key within the batch merge in memory
 *    and the key is written once;
 * 3. identity forest (identity-forest.ts): the union-find updated per applied record, in queue order;
 * 4. counter deltas (counter-deltas.ts): received/merged/discarded per record, and per touched key
 *    the stored record's contribution subtracted and the final one added.
 * Then bulk writes: records, changed identity nodes, re-parentings, new links, counters.
 *
 * Determinism: nothing here reads the clock. Times come from the records' received_at, identity
 * keys from queue positions, so the same queue always yields the same view, however the records
 * were split into batches and however often a batch was interrupted and applied again
 * (test/consumer/batch-applier-model.test.ts checks this against a record-at-a-time reference).
 */
import { hourOf } from '../model/hourly-counters.js';
import type { SuppressionFilter } from '../lifecycle/lifecycle-backend.js';
import type { MergedRecord, ViewTransaction } from '../merged-view/view-store.js';
import type { QueueRecord } from '../queue/event-queue.js';
import { loadBatch, type PreparedRecord } from './batch-loading.js';
import { CounterDeltas } from './counter-deltas.js';
import { IdentityForest } from './identity-forest.js';
import { mergeStep, type MergeStep } from './record-merge.js';

export interface ApplyOptions {
  /**
   * Record update window of a data set, in milliseconds, for records queued without the window they
   * were accepted under (before queues kept it: mergeWindowOf).
   */
  mergeWindowMs(dataSetId: string): number;
  /**
   * The suppression list (`identities forget --suppress`, lifecycle/lifecycle-backend.ts
   * SuppressionFilter): a record carrying a suppressed identifier is counted (`suppressed`) and dropped
   * before the merged view. ViewConsumer refreshes it under the view's write lock before every batch
   * (view-consumer.ts), so it depends on the list when applied, never on a clock.
   */
  readonly suppressions?: SuppressionFilter;
}

export interface BatchResult {
  readonly records: number;
  readonly created: number;
  readonly merged: number;
  readonly discarded: number;
}

export async function applyRecords(tx: ViewTransaction, records: readonly QueueRecord[], options: ApplyOptions): Promise<BatchResult> {
  const batch = await loadBatch(tx, records);
  const forest = new IdentityForest(batch.nodes, batch.links);
  const counters = new CounterDeltas();
  /** Current state of every key the batch touched (starting from the stored one). */
  const current = new Map<string, MergedRecord>();
  const windows = new Map<string, number>();
  const counts: MergeCounts = { created: 0, merged: 0, discarded: 0 };

  for (const p of batch.prepared) {
    const existing = current.get(p.pk) ?? batch.records.get(p.pk);
    const step = countedMergeStep(p, existing, options, windows, counters, counts);
    if (step === null) continue;
    const identityKey = forest.apply(p.record.data_set_id, p.record.seq, existing?.identityKey ?? null, step.identifiers);
    current.set(p.pk, identityKey === step.record.identityKey ? step.record : { ...step.record, identityKey });
  }

  counters.addReplaced(current, batch.records);

  await tx.writeRecords([...current.values()]);
  await forest.writeChanges(tx);
  await tx.addCounters(counters.deltas());
  return { records: records.length, created: counts.created, merged: counts.merged, discarded: counts.discarded };
}

/** A batch's outcome counts, one object a batch updated in place by countedMergeStep. */
export interface MergeCounts {
  created: number;
  merged: number;
  discarded: number;
}

/**
 * The merge window a queued record is decided by: the one it was accepted under, queued with it, so
 * that the decision is a function of the queue (the same for every part of the sharded layout, and
 * for a replay, whenever the policy changes). A record queued before queues kept it is stamped with
 * its data set's window at the consumer's start (queue/sqlite-legacy-windows.ts,
 * queue/postgres-legacy-windows.ts; on PostgreSQL also by the first lane that reads one an older
 * node queued during a rolling upgrade); one still null (a reader of a file no writer of this version
 * opened, an older embedded binary writing after the stamp, which is not supported) takes its data
 * set's window as `options` has it now, asked once a batch (`windows` is the batch's cache).
 */
export function mergeWindowOf(options: ApplyOptions, windows: Map<string, number>, record: QueueRecord): number {
  const queued = record.merge_window_ms;
  if (queued !== undefined && queued !== null) return queued;
  let windowMs = windows.get(record.data_set_id);
  if (windowMs === undefined) windows.set(record.data_set_id, (windowMs = options.mergeWindowMs(record.data_set_id)));
  return windowMs;
}

/**
 * The per-record merge and counting part shared by applyRecords and the record shards
 * (record-shard-applier.ts): counts the record received, drops it when suppressed, applies the merge
 * rule (record-merge.ts) in its data set's window and counts the outcome. Returns the merge step, or
 * null when the record was suppressed or discarded. Hot path: everything comes as arguments, so no
 * closure or object is made per record here (mergeStep makes the merged record).
 */
export function countedMergeStep(
  p: PreparedRecord,
  existing: MergedRecord | undefined,
  options: ApplyOptions,
  windows: Map<string, number>,
  counters: CounterDeltas,
  counts: MergeCounts,
): Extract<MergeStep, { discarded: false }> | null {
  const dataSetId = p.record.data_set_id;
  const arrivalHour = hourOf(p.record.received_at);
  counters.add(dataSetId, arrivalHour, 'received', 1);
  if (options.suppressions?.suppressed(dataSetId, p.identifiers)) {
    counters.add(dataSetId, arrivalHour, 'suppressed', 1);
    return null;
  }
  const step = mergeStep(existing, p, mergeWindowOf(options, windows, p.record));
  if (step.discarded) {
    counters.add(dataSetId, arrivalHour, 'discarded', 1);
    counts.discarded++;
    return null;
  }
  if (existing) {
    counters.add(dataSetId, arrivalHour, 'merged', 1);
    counts.merged++;
  } else counts.created++;
  return step;
}
