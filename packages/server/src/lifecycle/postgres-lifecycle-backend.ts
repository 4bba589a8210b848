/** The scale-out profile's lifecycle backend: everything in the environment's PostgreSQL schema. */
import { VIEW_CONSUMER } from '../consumer/view-consumer.js';
import type { Pool } from '../storage/postgres/database.js';
import { partitionConsumer, partitionOf } from '../storage/postgres/partitions.js';
import type { LifecycleBackend, ViewEraser } from './lifecycle-backend.js';
import { PostgresLifecycleStore } from './postgres-lifecycle-store.js';
import { PostgresQueueEraser } from './postgres-queue-eraser.js';
import { PostgresViewEraser } from './postgres-view-eraser.js';

export class PostgresLifecycleBackend implements LifecycleBackend {
  readonly store: PostgresLifecycleStore;
  readonly queue: PostgresQueueEraser;
  readonly #view: PostgresViewEraser;

  readonly #pool: Pool;

  constructor(pool: Pool) {
    this.#pool = pool;
    this.store = new PostgresLifecycleStore(pool);
    this.queue = new PostgresQueueEraser(pool);
    this.#view = new PostgresViewEraser(pool);
  }

  /**
   * The data set's queue partition has no segment up to `boundSeq` that its consumer offset has not
   * passed (an idle partition's offset stays where its last segment ended).
   */
  async applied(dataSetId: string, boundSeq: number): Promise<boolean> {
    const part = partitionOf(dataSetId);
    const { rows } = await this.#pool.query<{ pending: boolean }>(
      `SELECT EXISTS (
         SELECT 1 FROM queue_segments
          WHERE part = $1 AND first_seq <= $2
            AND first_seq + event_count > COALESCE((SELECT next_seq FROM consumer_offsets WHERE consumer = $3), 1)) AS pending`,
      [part, boundSeq, partitionConsumer(VIEW_CONSUMER, part)],
    );
    return !rows[0]!.pending;
  }

  async viewEraser(): Promise<ViewEraser> {
    return this.#view;
  }

  async close(): Promise<void> {}
}
