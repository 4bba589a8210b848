/**
 * The record part of the sharded layout (design: identity-stage-applier.ts): applies a batch of
 * the queued records of ONE record shard (record-shard.ts) to that shard's merged records and
 * counters, in one transaction of the shard's store with the shard's offset. No identity work at
 * all: the shard's records keep `identity_key` NULL; a record's identity lives in the identity
 * stage's `record_identities` and reads join them (merged-view/sharded-view-store.ts).
 *
 * Exactly view-applier.ts's merge and counter parts (its countedMergeStep), per record
 * in queue order; the rules touch one key at a time (merge, merge window) or add integers
 * (counters), so a shard applying its own keys in queue order gives each of its records and each
 * counter's share exactly what one applier over the whole queue gives.
 *
 * The merge-window and suppression decisions are taken here and, independently, by the identity
 * stage: both from the queue (the window queued with the record) and a suppression list that
 * changes only while the parts are held together (identity-stage-applier.ts, "Decisions").
 */
import type { MergedRecord, ViewTransaction } from '../merged-view/view-store.js';
import type { QueueRecord } from '../queue/event-queue.js';
import { prepareRecords, recordRef, Wanted } from './batch-loading.js';
import { CounterDeltas } from './counter-deltas.js';
import { countedMergeStep, type ApplyOptions, type BatchResult, type MergeCounts } from './view-applier.js';

export async function applyRecordShard(tx: ViewTransaction, records: readonly QueueRecord[], options: ApplyOptions): Promise<BatchResult> {
  const prepared = prepareRecords(records);
  const recordKeys = new Wanted();
  for (const p of prepared) recordKeys.add(p.record.data_set_id, p.key);
  const stored = await tx.loadRecords(recordKeys.pairs(recordRef));
  const counters = new CounterDeltas();
  const current = new Map<string, MergedRecord>();
  const windows = new Map<string, number>();
  const counts: MergeCounts = { created: 0, merged: 0, discarded: 0 };
  for (const p of prepared) {
    const step = countedMergeStep(p, current.get(p.pk) ?? stored.get(p.pk), options, windows, counters, counts);
    if (step !== null) current.set(p.pk, step.record);
  }
  counters.addReplaced(current, stored);
  await tx.writeRecords([...current.values()]);
  await tx.addCounters(counters.deltas());
  return { records: records.length, created: counts.created, merged: counts.merged, discarded: counts.discarded };
}
