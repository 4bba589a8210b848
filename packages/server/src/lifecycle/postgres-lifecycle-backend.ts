/** The scale-out profile's lifecycle backend: everything in the environment's PostgreSQL schema. */
import type { Pool } from '../storage/postgres/database.js';
import type { LifecycleBackend, ViewEraser } from './lifecycle-backend.js';
import { PostgresLifecycleStore } from './postgres-lifecycle-store.js';
import { PostgresQueueEraser } from './postgres-queue-eraser.js';
import { PostgresViewEraser } from './postgres-view-eraser.js';

export class PostgresLifecycleBackend implements LifecycleBackend {
  readonly store: PostgresLifecycleStore;
  readonly queue: PostgresQueueEraser;
  readonly #view: PostgresViewEraser;

  constructor(pool: Pool) {
    this.store = new PostgresLifecycleStore(pool);
    this.queue = new PostgresQueueEraser(pool);
    this.#view = new PostgresViewEraser(pool);
  }

  async viewEraser(): Promise<ViewEraser> {
    return this.#view;
  }

  async close(): Promise<void> {}
}
