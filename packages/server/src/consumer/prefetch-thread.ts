/**
 * The prefetch thread of one partition (batch-prefetch.ts ThreadPrefetcher): reads the queue
 * records of the batch it is asked for, decodes them and makes that batch's view reads in one
 * snapshot of a read connection of its own, and posts the answers back. It writes nothing.
 *
 * Messages: {type: 'load', id, from, limit} → {id, lookups} or {id, error}; {type: 'close'}.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { SqliteViewStore } from '../merged-view/sqlite-view-store.js';
import { PrefetchLoader, type PrefetchThreadData, type PrefetchThreadMessage, type PrefetchThreadReply } from './batch-prefetch.js';
import { partitionOf } from './data-set-partition.js';
import { SqliteQueueSource } from './sqlite-queue-source.js';

const data = workerData as PrefetchThreadData;
const port = parentPort!;
const loader = new PrefetchLoader(
  new SqliteQueueSource(data.queueFile, data.partitions > 1 ? { accept: (dataSetId) => partitionOf(dataSetId, data.partitions) === data.partition } : {}),
  new SqliteViewStore(data.viewFile),
  data.consumer,
);

port.on('message', (message: PrefetchThreadMessage) => {
  if (message.type === 'load') {
    loader.load(message.from, message.limit).then(
      (lookups) => port.postMessage({ id: message.id, lookups } satisfies PrefetchThreadReply),
      (error: Error) => port.postMessage({ id: message.id, error: error.message } satisfies PrefetchThreadReply),
    );
  } else if (message.type === 'close') {
    void loader.close().finally(() => port.close());
  }
});
