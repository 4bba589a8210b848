/**
 * The ViewEraser contract against a sharded embedded view (lifecycle/sharded-view-eraser.ts): two
 * record shards and two identity parts, each a real file with its own eraser. The contract's state
 * is written as the sharded layout's parts hold it (records without identity in their shards, each
 * record's identity row, nodes and links in its data set's identity part) and read back through
 * the layout's read side (merged-view/sharded-view-store.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { ShardedViewEraser } from '../../src/lifecycle/sharded-view-eraser.js';
import { SqliteViewEraser } from '../../src/lifecycle/sqlite-view-eraser.js';
import { recordShardOf } from '../../src/merged-view/record-shard.js';
import { ShardedViewStore } from '../../src/merged-view/sharded-view-store.js';
import { SqliteViewStore } from '../../src/merged-view/sqlite-view-store.js';
import type { ViewStore, ViewTransaction } from '../../src/merged-view/view-store.js';
import { partitionAmong } from '../../src/model/data-set-partition.js';
import { tempDataDir } from '../helpers/server-process.js';
import { viewEraserContract } from './view-eraser-contract.js';

const P = 2;

/** The sharded view, written as its parts' consumers would leave it. */
class ShardedSeedStore extends ShardedViewStore {
  readonly #shards: SqliteViewStore[];
  readonly #identities: SqliteViewStore[];

  constructor(shards: SqliteViewStore[], identities: SqliteViewStore[]) {
    super(shards, identities);
    this.#shards = shards;
    this.#identities = identities;
  }

  override async transaction<T>(work: (tx: ViewTransaction) => Promise<T>): Promise<T> {
    const writes: ((txs: { shards: ViewTransaction[]; identities: ViewTransaction[] }) => Promise<void>)[] = [];
    const tx = {
      writeRecords: async (records) => {
        writes.push(async ({ shards, identities }) => {
          for (const r of records) {
            await shards[recordShardOf(r.dataSetId, r.recordKey, P)]!.writeRecords([{ ...r, identityKey: null }]);
            await identities[partitionAmong(r.dataSetId, P)]!.writeRecordIdentities!([
              { dataSetId: r.dataSetId, recordKey: r.recordKey, firstReceivedAt: r.firstReceivedAt, identityKey: r.identityKey },
            ]);
          }
        });
      },
      writeIdentities: async (nodes) => {
        writes.push(async ({ identities }) => {
          for (const n of nodes) await identities[partitionAmong(n.dataSetId, P)]!.writeIdentities([n]);
        });
      },
      linkIdentifiers: async (links) => {
        writes.push(async ({ identities }) => {
          for (const l of links) await identities[partitionAmong(l.dataSetId, P)]!.linkIdentifiers([l]);
        });
      },
      addCounters: async (deltas) => {
        writes.push(async ({ shards }) => void (await shards[0]!.addCounters(deltas)));
      },
    } as Partial<ViewTransaction> as ViewTransaction;
    const result = await work(tx);
    const stores = [...this.#shards, ...this.#identities];
    const open = async (i: number, txs: ViewTransaction[]): Promise<void> => {
      if (i < stores.length) return void (await stores[i]!.transaction((t) => open(i + 1, [...txs, t])));
      for (const write of writes) await write({ shards: txs.slice(0, P), identities: txs.slice(P) });
    };
    await open(0, []);
    return result;
  }
}

viewEraserContract('SQLite, sharded layout', {
  async create() {
    const dir = tempDataDir('ecapi-sharded-eraser-');
    const shardFiles = Array.from({ length: P }, (_, k) => join(dir, `view-s${k}.db`));
    const identityFiles = Array.from({ length: P }, (_, k) => join(dir, `view-p${k}.db`));
    const shards = shardFiles.map((file) => new SqliteViewStore(file));
    const identities = identityFiles.map((file) => new SqliteViewStore(file));
    const store: ViewStore = new ShardedSeedStore(shards, identities);
    const shardErasers = shardFiles.map((file) => new SqliteViewEraser(file));
    const identityErasers = identityFiles.map((file) => new SqliteViewEraser(file));
    const eraser = new ShardedViewEraser(shardErasers, identityErasers[partitionAmong('ds', P)]!);
    let request = 0;
    return {
      store,
      eraser,
      dispose: async () => {
        for (const e of [...shardErasers, ...identityErasers]) e.close();
        await store.close();
      },
      newRequest: async () => ++request,
    };
  },
});

test('the contract\'s data set spreads over both shards (the sharded eraser is not tested on one file)', () => {
  const shards = new Set(['r1', 'r2', 'r3', 'r4'].map((id) => recordShardOf('ds', `id:${id}`, P)));
  assert.equal(shards.size, P);
});
