/**
 * The identity stage of the sharded layout: one data set's merged records applied by P threads.
 *
 * Role. Issue 30: one data set was applied by one thread (data-set partitions, DESIGN.md). `worker
 * --view-layout sharded` (merged-view/sqlite-view-layout.ts; recorded when a view is first consumed)
 * runs this layout instead, in which a view has two kinds of parts, each a file of its own with its
 * own writer, its own offset and its own transaction:
 * - P **record shards** (record-shard-applier.ts): the merged records and the counters of the keys
 *   `merged-view/record-shard.ts recordShardOf(data set, record key, P)` gives them, every data set spread over
 *   every shard;
 * - P **identity parts** (this module): identifier links, identity nodes and `record_identities`
 *   (per record: its first_received_at and its identity key) of the data sets
 *   `model/data-set-partition.ts partitionAmong(data set, P)` gives them; one data set's identities are
 *   applied by one part, in queue order.
 * Each part reads the queue itself from its own offset (a shard keeps its own keys' records, an
 * identity part its data sets'), so parts share nothing while applying: no hand-off between
 * threads, no two-phase commit, no ordering between parts. A crash between two parts' commits is
 * harmless: each part's input is the queue, its state is its own file, and it resumes from its own
 * offset (exactly-once per part, as a data-set partition is today).
 *
 * Why the view is exactly the one docs/guides/merged-view.md defines (the record-at-a-time
 * reference of test/helpers/reference-view.ts; test/consumer/batch-applier-model.test.ts checks it
 * with P = 1, 2, 4, random batch sizes, random interleavings of the parts and rolled-back batches):
 * - Merge, merge window, counters: per key, or sums of integers; a shard applies every record of
 *   its keys in queue order, so each record and each counter's share is what one applier gives.
 * - Identity linking: the union-find's step for a record depends on (data set, queue position,
 *   whether the record was applied, the identity its merged record had before, the identifiers of
 *   its merged event), and its result on the order of the steps. This stage applies its data sets'
 *   records in queue order, like the single applier, and derives every input itself:
 *   * applied: not suppressed, and not after the merge window, which needs only whether the key
 *     exists and its first_received_at; both are functions of the queue (the min of received_at over
 *     the key's applied records) that this stage keeps in `record_identities`, as the shard keeps them
 *     in its record;
 *   * the previous identity: `record_identities.identity_key`, which this stage writes;
 *   * the identifiers: those of the queued event instead of the merged event's. Same step: every
 *     identifier of the stored merged event was linked, when its record was applied, to that
 *     record's identity tree (linked to the survivor, or already linked to a root united with it),
 *     so it adds no root beyond the previous identity's and no new link; and every identifier of the
 *     queued event is one of the merged event's (identifier arrays are unioned, scalars take the
 *     newer value). A record with no previous identity had no identifiers, so both lists are equal.
 *   The older identity survives a union and a new identity is named after the queue position of the
 *   record that started it (identity-forest.ts), as before.
 * - Reads (merged-view/sharded-view-store.ts): a record from its shard, its identity key from its
 *   data set's identity part (`record_identities`), resolved there; counters summed over the shards.
 *
 * Decisions. Suppression and the merge window are decided by the shard and by the identity stage
 * each on its own, so they must be functions of what both see alike:
 * - the merge window is the one the record was accepted under, queued with it
 *   (QueueRecord.merge_window_ms; view-applier.ts mergeWindowOf), not the policy at apply time: a
 *   policy changed while the two are at different queue positions changes nothing for records
 *   already queued. Records queued before queues kept the window are given their data set's window
 *   once, at the consumer's start before any part applies them (queue/sqlite-legacy-windows.ts,
 *   queue/postgres-legacy-windows.ts), so they too are decided alike (they used to take each part's
 *   window at apply time: merged but not linked, or linked but discarded, had the policy changed
 *   while the parts were apart over them);
 * - the suppression list changes only by `identities forget --suppress`, which holds every part at
 *   one queue position before it stores the identifiers (lifecycle-runner.ts), and every part reads
 *   the list under its write lock before each batch (view-consumer.ts), so every
 *   part applies every record past that position under the new list.
 *
 * Lifecycle (lifecycle/sharded-view-eraser.ts). A deletion (retention, `events delete`, `identities
 * forget`) touches a record's shard and its identity part, two files at different queue offsets.
 * Deleted in both at one wall-clock time, a re-send queued between the two offsets would be merged
 * and then deleted by the part that was ahead, but applied after the deletion (a new record, a new
 * identity) by the part that was behind: the parts would disagree for good. So the lifecycle first
 * holds the data set's identity part and every shard at one queue position (a fence in each file
 * that its consumer reads under its write lock: merged-view/view-fence.ts, lifecycle/parts-fence.ts),
 * deletes from a view that is exactly one applier's at that position, and lets them go.
 *
 * Memory: one batch per part thread and its maps, as a data-set partition (DESIGN.md "Memory
 * bound"); `record_identities` is a row per record on disk (no event), not in memory.
 */
import type { RecordIdentity, ViewTransaction } from '../merged-view/view-store.js';
import type { QueueRecord } from '../queue/event-queue.js';
import { identifierRef, loadIdentityNodes, prepareRecords, recordRef, Wanted } from './batch-loading.js';
import { IdentityForest } from './identity-forest.js';
import { mergeWindowOf, type ApplyOptions, type BatchResult } from './view-applier.js';

export async function applyIdentityStage(tx: ViewTransaction, records: readonly QueueRecord[], options: ApplyOptions): Promise<BatchResult> {
  if (!tx.loadRecordIdentities || !tx.writeRecordIdentities) throw new Error('this view store has no identity stage (sharded layout)');
  const prepared = prepareRecords(records);
  const recordKeys = new Wanted();
  const identifiers = new Wanted();
  for (const p of prepared) {
    recordKeys.add(p.record.data_set_id, p.key);
    for (const identifier of p.identifiers) identifiers.add(p.record.data_set_id, identifier);
  }
  const stored = await tx.loadRecordIdentities(recordKeys.pairs(recordRef));
  const links = await tx.loadIdentifierLinks(identifiers.pairs(identifierRef));
  const nodes = await loadIdentityNodes(tx, links, stored.values());

  const forest = new IdentityForest(nodes, links);
  const current = new Map<string, RecordIdentity>();
  const windows = new Map<string, number>();
  let created = 0;
  let merged = 0;
  let discarded = 0;
  for (const p of prepared) {
    const { record } = p;
    const dataSetId = record.data_set_id;
    if (options.suppressions?.suppressed(dataSetId, p.identifiers)) continue;
    const existing = current.get(p.pk) ?? stored.get(p.pk);
    const windowMs = mergeWindowOf(options, windows, record);
    // record-merge.ts mergeStep's rule, on the stage's own first_received_at.
    if (existing && record.received_at - existing.firstReceivedAt > windowMs) {
      discarded++;
      continue;
    }
    if (existing) merged++;
    else created++;
    const identityKey = forest.apply(dataSetId, record.seq, existing?.identityKey ?? null, p.identifiers);
    const firstReceivedAt = existing ? Math.min(existing.firstReceivedAt, record.received_at) : record.received_at;
    if (!existing || existing.identityKey !== identityKey || existing.firstReceivedAt !== firstReceivedAt) {
      current.set(p.pk, { dataSetId, recordKey: p.key, firstReceivedAt, identityKey });
    }
  }

  await tx.writeRecordIdentities([...current.values()]);
  await forest.writeChanges(tx);
  return { records: records.length, created, merged, discarded };
}
