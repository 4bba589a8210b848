/**
 * The PostgreSQL profile of the lifecycle model tests (test/lifecycle/deletion-model.test.ts,
 * retention-model.test.ts), wired in-process as the worker wires it (storage/postgres-storage.ts,
 * consumer/postgres-partitions.ts): the environment's schema dropped and migrated again for each run,
 * a main pool and the queue's pool, the real queue, view store and lifecycle backend, and one
 * ViewConsumer per queue partition of the run's data sets (a lane), reading ahead over its
 * partition's segments under the partition's consumer name. Leases and idle-lane skipping are not
 * exercised: a test steps the lanes itself.
 */
import type { Environment } from '../../src/config.js';
import { readingAhead } from '../../src/consumer/read-ahead-source.js';
import { ViewConsumer, type ConsumerOptions } from '../../src/consumer/view-consumer.js';
import { PostgresLifecycleBackend } from '../../src/lifecycle/postgres-lifecycle-backend.js';
import { PostgresViewStore } from '../../src/merged-view/postgres-view-store.js';
import { partitionConsumer, VIEW_CONSUMER } from '../../src/model/consumer-offsets.js';
import { createPool, migrate, schemaOf, type Pool } from '../../src/postgres/database.js';
import { queuePartitionOf } from '../../src/postgres/partitions.js';
import { PostgresEventQueue, readSegments } from '../../src/queue/postgres-event-queue.js';
import { freshDatabase, queryDatabase } from './postgres.js';

export interface PostgresModelLanes {
  readonly pool: Pool;
  readonly queue: PostgresEventQueue;
  readonly view: PostgresViewStore;
  readonly lifecycle: PostgresLifecycleBackend;
  /** One consumer per queue partition of the data sets. */
  readonly lanes: readonly ViewConsumer[];
  /** The lane of a data set. */
  laneOf(dataSetId: string): number;
  /** Closes everything it opened (the caller first closes what it built on `pool`). */
  close(): Promise<void>;
}

/**
 * A database for a property's runs: `url` null creates it (named after `name`), otherwise the
 * environment's schema is dropped; then migrated. Returns the database's URL.
 */
export async function resetModelDatabase(url: string | null, name: string, env: Environment): Promise<string> {
  const at = url ?? (await freshDatabase(name));
  if (url !== null) await queryDatabase(at, `DROP SCHEMA IF EXISTS ${schemaOf(env)} CASCADE`);
  await migrate(at, env);
  return at;
}

/** Opens the components on `url`; `options(lane)`: the consumer options of a lane, but its consumer name. */
export function openModelLanes(url: string, env: Environment, dataSets: readonly string[], options: (lane: number) => Omit<ConsumerOptions, 'consumer'>): PostgresModelLanes {
  const pool = createPool(url, env, { max: 6 });
  const queuePool = createPool(url, env, { max: 2, settings: { lock_timeout: '5s', statement_timeout: '30s' } });
  const queue = new PostgresEventQueue(queuePool);
  const view = new PostgresViewStore(pool);
  const lifecycle = new PostgresLifecycleBackend(pool);
  const parts = [...new Set(dataSets.map(queuePartitionOf))];
  const sources = parts.map((part) => readingAhead((fromSeq, limit) => readSegments(pool, { fromSeq, limit, part })));
  const lanes = parts.map((part, lane) => new ViewConsumer(view, sources[lane]!, { ...options(lane), consumer: partitionConsumer(VIEW_CONSUMER, part) }));
  return {
    pool,
    queue,
    view,
    lifecycle,
    lanes,
    laneOf: (ds) => parts.indexOf(queuePartitionOf(ds)),
    async close() {
      await queue.close();
      for (const source of sources) await source.close();
      await lifecycle.close();
      await view.close();
      await queuePool.end();
      await pool.end();
    },
  };
}
