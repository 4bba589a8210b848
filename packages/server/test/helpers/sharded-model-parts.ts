/**
 * The sharded layout of the embedded view (consumer/identity-stage-applier.ts) for the lifecycle
 * model tests (test/lifecycle/deletion-model.test.ts, retention-model.test.ts), wired in-process as
 * consumer/sqlite-partition-thread.ts wires a part: P record shards (view-s<k>.db, applyRecordShard,
 * a SqliteQueueSource keeping its shard's records: `acceptRecord`) and P identity parts (view.db,
 * view-p<k>.db, applyIdentityStage, a SqliteQueueSource keeping its data sets: `accept`), each its
 * own SqliteViewStore (hot identifier links in the identity parts only, as the thread: a shard holds
 * no links) and ViewConsumer. The layout must be recorded first
 * (`SqlitePartitionedView.fixLayout({ partitions: P, kind: 'sharded' })`, which prepares the files).
 *
 * Consumer lanes: 0 … P-1 the record shards, P … 2P-1 the identity parts. A data set's lanes: every
 * shard and its identity part (those its ShardedViewEraser holds, lifecycle/sharded-view-eraser.ts).
 *
 * `whileHeld` (`stepWhileHeld`, shared with the PostgreSQL sharded profile,
 * test/helpers/postgres-model-lanes.ts): the lifecycle runner holds a data set's parts at one queue
 * position before it deletes (lifecycle/parts-fence.ts) and waits until their consumers have stepped
 * up to it, so something must step them while `tick()` runs. It steps, until the tick settles, every
 * part that is held (its file, or its lane's offset row, has a fence) below its fence, and no other:
 * the schedule of a worker whose consumers happen to be idle during the round except where a hold
 * waits for them. Deterministic: a part moves only up to the position the hold fixed (the highest
 * offset among the data set's parts when it froze them, none of which moves meanwhile), and the
 * fence is never released while a step the loop started can still cross it (the runner releases only
 * once every held part has reached it, and only this loop steps them). The steps are reported
 * (`onStep`) for the harness's bookkeeping.
 */
import { SqliteQueueSource } from '../../src/consumer/sqlite-queue-source.js';
import { applyIdentityStage } from '../../src/consumer/identity-stage-applier.js';
import { applyRecordShard } from '../../src/consumer/record-shard-applier.js';
import { ViewConsumer, type ConsumerOptions, type StepResult } from '../../src/consumer/view-consumer.js';
import { queuedRecordShard, recordShardOf } from '../../src/merged-view/record-shard.js';
import { SqliteViewStore } from '../../src/merged-view/sqlite-view-store.js';
import { viewPartitionFile, viewShardFile } from '../../src/merged-view/sqlite-view-layout.js';
import { VIEW_CONSUMER } from '../../src/model/consumer-offsets.js';
import { partitionAmong } from '../../src/model/data-set-partition.js';

export interface ShardedPart {
  readonly role: 'records' | 'identities';
  readonly store: SqliteViewStore;
  readonly source: SqliteQueueSource;
  readonly consumer: ViewConsumer;
}

export interface ShardedParts {
  /** By lane: the record shards, then the identity parts. */
  readonly parts: readonly ShardedPart[];
  /** The lanes of a data set: every record shard, and its identity part. */
  lanesOf(dataSetId: string): number[];
  /** The lane of the record shard holding a record. */
  shardLaneOf(dataSetId: string, recordKey: string): number;
  /**
   * Runs `work` (a lifecycle round) while stepping the held parts (above) with `step`, reporting
   * each step; returns (or throws) what `work` did.
   */
  whileHeld<T>(work: () => Promise<T>, step: (lane: number) => Promise<StepResult>, onStep: (lane: number, result: StepResult) => void): Promise<T>;
  close(): Promise<void>;
}

/**
 * Opens the 2P parts of the sharded view of `viewFile`; `options(lane)`: the consumer's options (its
 * applier is the part's); `hotLinks`: the identity parts' hot state bound (view-hot-state.ts; 0: none).
 */
export function openShardedParts(
  queueFile: string,
  viewFile: string,
  P: number,
  options: (lane: number) => Omit<ConsumerOptions, 'applier'>,
  hotLinks = 0,
): ShardedParts {
  const parts: ShardedPart[] = [];
  for (let k = 0; k < P; k++) {
    const store = new SqliteViewStore(viewShardFile(viewFile, k));
    const source = new SqliteQueueSource(queueFile, { acceptRecord: (record) => queuedRecordShard(record, P) === k });
    parts.push({ role: 'records', store, source, consumer: new ViewConsumer(store, source, { ...options(k), applier: applyRecordShard }) });
  }
  for (let p = 0; p < P; p++) {
    const store = new SqliteViewStore(viewPartitionFile(viewFile, p), { hotLinks });
    const source = new SqliteQueueSource(queueFile, { accept: (dataSetId) => partitionAmong(dataSetId, P) === p });
    parts.push({ role: 'identities', store, source, consumer: new ViewConsumer(store, source, { ...options(P + p), applier: applyIdentityStage }) });
  }
  const shards = Array.from({ length: P }, (_, k) => k);
  return {
    parts,
    lanesOf: (dataSetId) => [...shards, P + partitionAmong(dataSetId, P)],
    shardLaneOf: (dataSetId, recordKey) => recordShardOf(dataSetId, recordKey, P),
    whileHeld: (work, step, onStep) =>
      stepWhileHeld(work, async () => {
        const held: number[] = [];
        for (const [lane, part] of parts.entries()) {
          const fence = await part.store.fence();
          if (fence !== null && (await part.store.offset(VIEW_CONSUMER)) <= fence) held.push(lane);
        }
        return held;
      }, step, onStep),
    async close() {
      for (const part of parts) {
        await part.source.close();
        await part.store.close();
      }
    },
  };
}

/**
 * Runs `work` (a lifecycle round) and, until it settles, steps with `step` every lane `heldLanes`
 * gives (those held below their fence, read afresh each pass), reporting each step to `onStep`;
 * returns (or throws) what `work` did. See `whileHeld` above for why this is deterministic.
 */
export async function stepWhileHeld<T>(
  work: () => Promise<T>,
  heldLanes: () => Promise<readonly number[]>,
  step: (lane: number) => Promise<StepResult>,
  onStep: (lane: number, result: StepResult) => void,
): Promise<T> {
  let settled = false;
  const outcome = work()
    .then((value) => ({ ok: true as const, value }), (error: unknown) => ({ ok: false as const, error }))
    .finally(() => (settled = true));
  while (!settled) {
    let stepped = false;
    for (const lane of await heldLanes()) {
      onStep(lane, await step(lane));
      stepped = true;
    }
    if (!stepped) await new Promise((resolve) => setTimeout(resolve, 1));
  }
  const done = await outcome;
  if (!done.ok) throw done.error;
  return done.value;
}
