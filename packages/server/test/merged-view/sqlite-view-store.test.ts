/** The ViewStore and IngestStatsStore contracts against the embedded SQLite stores. */
import { join } from 'node:path';
import { SqliteIngestStatsStore, SqliteViewStore } from '../../src/merged-view/sqlite-view-store.js';
import { tempDataDir } from '../helpers/server-process.js';
import { ingestStatsContract, viewStoreContract } from './view-store-contract.js';

viewStoreContract('SQLite', {
  async create() {
    const store = new SqliteViewStore(join(tempDataDir('ecapi-view-'), 'view.db'));
    return { store, dispose: () => store.close() };
  },
});

ingestStatsContract('SQLite', {
  async create() {
    const store = new SqliteIngestStatsStore(join(tempDataDir('ecapi-ingest-stats-'), 'ingest-stats.db'));
    return { store, dispose: () => store.close() };
  },
});
