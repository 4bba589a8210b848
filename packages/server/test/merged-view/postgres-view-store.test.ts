/** The ViewStore and IngestStatsStore contracts against PostgreSQL (skipped without ECAPI_TEST_DATABASE_URL). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { finalParents, PostgresIngestStatsStore, PostgresViewStore } from '../../src/merged-view/postgres-view-store.js';
import { migratedPool, pgOnly } from '../helpers/postgres.js';
import { ingestStatsContract, viewStoreContract } from './view-store-contract.js';

viewStoreContract(
  'PostgreSQL',
  {
    async create() {
      const pool = await migratedPool('view');
      const store = new PostgresViewStore(pool);
      return { store, dispose: async () => (await store.close(), await pool.end()) };
    },
  },
  pgOnly,
);

// The consumer's store, with hot links (merged-view/postgres-hot-links.ts): the same contract.
viewStoreContract(
  'PostgreSQL with hot links',
  {
    async create() {
      const pool = await migratedPool('view');
      const store = new PostgresViewStore(pool).withHotLinks(1_000);
      return { store, dispose: async () => (await store.close(), await pool.end()) };
    },
  },
  pgOnly,
);

ingestStatsContract(
  'PostgreSQL',
  {
    async create() {
      const pool = await migratedPool('view');
      const store = new PostgresIngestStatsStore(pool);
      return { store, dispose: async () => (await store.close(), await pool.end()) };
    },
  },
  pgOnly,
);

test('finalParents folds a batch of moves into one target per starting parent', () => {
  const ds = 'ds';
  assert.deepEqual(finalParents([{ dataSetId: ds, from: 'b', to: 'c' }, { dataSetId: ds, from: 'c', to: 'a' }]), [
    { dataSetId: ds, from: 'b', to: 'a' },
    { dataSetId: ds, from: 'c', to: 'a' },
  ]);
  // A move back to where a chain started cancels out; data sets never mix.
  assert.deepEqual(finalParents([{ dataSetId: ds, from: 'a', to: 'b' }, { dataSetId: ds, from: 'b', to: 'a' }, { dataSetId: 'other', from: 'a', to: 'z' }]), [
    { dataSetId: ds, from: 'b', to: 'a' },
    { dataSetId: 'other', from: 'a', to: 'z' },
  ]);
});
