/**
 * The files of one run of an embedded profile of the lifecycle model tests
 * (test/lifecycle/deletion-model.test.ts, retention-model.test.ts): the environment's queue and
 * view files in `dataDir`, the queue opened, and the view opened with its layout recorded as
 * `layout` (checked), as the worker records it when it starts (merged-view/sqlite-view-layout.ts).
 */
import assert from 'node:assert/strict';
import { environmentDir, queueDbFile, viewDbFile, type Environment } from '../../src/config.js';
import { SqlitePartitionedView } from '../../src/merged-view/partitioned-view-store.js';
import type { ViewLayout } from '../../src/merged-view/sqlite-view-layout.js';
import { SqliteEventQueue } from '../../src/queue/sqlite-event-queue.js';

export interface EmbeddedModelRun {
  readonly envDir: string;
  readonly queueFile: string;
  readonly viewFile: string;
  readonly queue: SqliteEventQueue;
  readonly view: SqlitePartitionedView;
}

export function openEmbeddedModelRun(dataDir: string, env: Environment, layout: ViewLayout): EmbeddedModelRun {
  const queueFile = queueDbFile(dataDir, env);
  const viewFile = viewDbFile(dataDir, env);
  const queue = new SqliteEventQueue(queueFile);
  const view = new SqlitePartitionedView(viewFile);
  assert.deepEqual(view.fixLayout(layout), layout);
  return { envDir: environmentDir(dataDir, env), queueFile, viewFile, queue, view };
}
