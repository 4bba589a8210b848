/** The ViewEraser contract against an embedded view file. */
import { join } from 'node:path';
import { SqliteViewEraser } from '../../src/lifecycle/sqlite-view-eraser.js';
import { SqliteViewStore } from '../../src/merged-view/sqlite-view-store.js';
import { tempDataDir } from '../helpers/server-process.js';
import { viewEraserContract } from './view-eraser-contract.js';

viewEraserContract('SQLite', {
  async create() {
    const file = join(tempDataDir('ecapi-eraser-'), 'view.db');
    const store = new SqliteViewStore(file);
    const eraser = new SqliteViewEraser(file);
    let request = 0;
    return { store, eraser, dispose: async () => (eraser.close(), await store.close()), newRequest: async () => ++request };
  },
});
