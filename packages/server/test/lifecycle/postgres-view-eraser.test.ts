/** The ViewEraser contract against PostgreSQL (skipped without ECAPI_TEST_DATABASE_URL). */
import { PostgresLifecycleStore } from '../../src/lifecycle/postgres-lifecycle-store.js';
import { PostgresViewEraser } from '../../src/lifecycle/postgres-view-eraser.js';
import { PostgresViewStore } from '../../src/merged-view/postgres-view-store.js';
import { createPool, migrate } from '../../src/postgres/database.js';
import { freshDatabase, pgOnly } from '../helpers/postgres.js';
import { viewEraserContract } from './view-eraser-contract.js';

viewEraserContract(
  'PostgreSQL',
  {
    async create() {
      const url = await freshDatabase('eraser');
      await migrate(url, 'production');
      const pool = createPool(url, 'production');
      const store = new PostgresViewStore(pool);
      const lifecycle = new PostgresLifecycleStore(pool);
      // Tallies live in the request's row: a real pending request per test request.
      const newRequest = async () =>
        (await lifecycle.request({ dataSetId: 'ds', kind: 'delete_event', target: 'x', suppress: false, boundSeq: 0, actor: 'test' })).id;
      return { store, eraser: new PostgresViewEraser(pool), dispose: async () => (await store.close(), await pool.end()), newRequest };
    },
  },
  pgOnly,
);
