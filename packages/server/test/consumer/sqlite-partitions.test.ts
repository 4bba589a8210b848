/**
 * Closing the embedded partitions leaves nothing behind that keeps the consumer process alive: every
 * partition thread has exited and no timer of theirs is pending. A pending 5 s fallback timer once
 * kept every stopping consumer (and so every stopping `serve`) alive for 5 s.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SqliteEventQueue } from '../../src/queue/sqlite-event-queue.js';
import { queueDbFile, viewDbFile } from '../../src/config.js';
import { SqlitePartitions } from '../../src/consumer/sqlite-partitions.js';
import { tempDataDir } from '../helpers/server-process.js';
import { sampleEvent } from '../helpers/https-client.js';

const timers = () => process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;

test('closing two partition threads leaves no pending timer and applies what was queued', async () => {
  const dataDir = tempDataDir('ecapi-partitions-');
  const queue = new SqliteEventQueue(queueDbFile(dataDir, 'production'));
  for (const ds of ['ds-a', 'ds-b', 'ds-c']) {
    await queue.append({ requestId: `req-${ds}`, keyId: 'key_test', dataSetId: ds, receivedAt: Date.now(), policyVersion: 1, mergeWindowMs: 7 * 86_400_000, events: [sampleEvent(ds)], metas: [undefined] });
  }
  await queue.close();

  const before = timers();
  const partitions = new SqlitePartitions({ queueFile: queueDbFile(dataDir, 'production'), viewFile: viewDbFile(dataDir, 'production'), partitions: 2, batchSize: 100, windows: () => [] });
  let applied = 0;
  for (const partition of partitions.partitions) applied += (await partition.step()).records;
  await partitions.release();
  assert.equal(applied, 3, 'the two threads applied the three records between them');
  assert.equal(timers(), before, `no timer is left pending: ${JSON.stringify(process.getActiveResourcesInfo())}`);
});
