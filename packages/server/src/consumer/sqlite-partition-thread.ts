/**
 * One partition of the embedded view, applied in a worker thread of its own: its own SQLite
 * writer (its view file), its own queue reader (which skips other partitions' segments without
 * parsing them), its own offset. The consumer loop (consumer-loop.ts) runs in the main thread of
 * the worker process and asks this thread for one batch at a time (`step`), so stopping, backoff
 * and scheduling stay in one place; the thread only applies batches.
 *
 * Messages: {type: 'windows', windows} (merge windows by data set, sent before the first step and
 * after every refresh), {type: 'step', id} → {id, result} or {id, error}, {type: 'close'}.
 */
import { dirname } from 'node:path';
import { parentPort, workerData } from 'node:worker_threads';
import { lifecycleDbFile, SuppressionList } from '../lifecycle/sqlite-lifecycle-store.js';
import { DEFAULT_POLICY } from '../control/data-set-policy.js';
import { SqliteViewStore } from '../merged-view/sqlite-view-store.js';
import { partitionAmong } from '../model/data-set-partition.js';
import { SqliteQueueSource } from './sqlite-queue-source.js';
import { applyIdentityStage } from './identity-stage-applier.js';
import { applyRecordShard } from './record-shard-applier.js';
import { queuedRecordShard } from '../merged-view/record-shard.js';
import { ViewConsumer } from './view-consumer.js';

export interface PartitionThreadData {
  readonly queueFile: string;
  readonly viewFile: string;
  readonly partition: number;
  readonly partitions: number;
  readonly batchSize: number;
  /** Identifier links kept in memory (merged-view/view-hot-state.ts; 0 or absent: none; not in record shards). */
  readonly hotLinks?: number;
  /**
   * What this thread applies: a data-set partition (default), or, in the sharded layout
   * (identity-stage-applier.ts), record shard `partition` of `partitions` or identity part `partition`.
   */
  readonly role?: 'data-sets' | 'records' | 'identities';
}

export type PartitionThreadMessage =
  | { readonly type: 'windows'; readonly windows: readonly [string, number][] }
  | { readonly type: 'step'; readonly id: number }
  | { readonly type: 'close' };

const data = workerData as PartitionThreadData;
const port = parentPort!;
// Checkpoints are run by the process's main thread (sqlite-view-checkpointer.ts); the automatic one, at
// 256 MB of WAL, only as a safety net should those stop.
// The hot state (identifier links across batches) where links are: data-set partitions and identity
// parts, whose erasers (sqlite-view-eraser.ts, lifecycle/sharded-view-eraser.ts) bump the file's
// generation with every change; a record shard holds no links.
const store = new SqliteViewStore(data.viewFile, { autocheckpointPages: 65_536, ...(data.role !== 'records' ? { hotLinks: data.hotLinks ?? 0 } : {}) });
const source =
  data.role === 'records'
    ? new SqliteQueueSource(data.queueFile, { acceptRecord: (record) => queuedRecordShard(record, data.partitions) === data.partition })
    : new SqliteQueueSource(data.queueFile, { accept: (dataSetId) => partitionAmong(dataSetId, data.partitions) === data.partition });
const applier = data.role === 'records' ? applyRecordShard : data.role === 'identities' ? applyIdentityStage : undefined;
let windows = new Map<string, number>();
const defaultWindowMs = DEFAULT_POLICY.mergeWindowMs;
const suppressions = new SuppressionList(lifecycleDbFile(dirname(data.viewFile)));
const consumer = new ViewConsumer(store, source, {
  batchSize: data.batchSize,
  ...(applier ? { applier } : {}),
  mergeWindowMs: (dataSetId) => windows.get(dataSetId) ?? defaultWindowMs,
  suppressions,
});

port.on('message', (message: PartitionThreadMessage) => {
  if (message.type === 'windows') windows = new Map(message.windows);
  else if (message.type === 'step') {
    consumer.step().then(
      (result) => port.postMessage({ id: message.id, result }),
      (error: Error) => port.postMessage({ id: message.id, error: error.message }),
    );
  } else if (message.type === 'close') {
    suppressions.close();
    void source.close().then(() => store.close()).finally(() => port.close());
  }
});
