import { join } from 'node:path';
import { SqliteEventQueue } from '../../src/queue/sqlite-event-queue.js';
import { tempDataDir } from '../helpers/server-process.js';
import { eventQueueContract } from './event-queue-contract.js';

eventQueueContract('SqliteEventQueue', {
  async create() {
    const file = join(tempDataDir('ecapi-queue-'), 'queue.db');
    return { queue: new SqliteEventQueue(file), reopen: async () => new SqliteEventQueue(file) };
  },
});
