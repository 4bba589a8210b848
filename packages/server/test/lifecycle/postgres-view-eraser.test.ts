/**
 * The ViewEraser contract against PostgreSQL (skipped without ECAPI_TEST_DATABASE_URL), in both
 * layouts of the view (merged-view/postgres-view-layout.ts).
 *
 * Sharded layout (S = 2 record shards): the layout recorded as the worker records it, and the
 * eraser the lifecycle backend gives for the data set (`viewEraser`: a PostgresViewEraser holding
 * the data set's queue partition). The contract's state is written through the lanes' own stores
 * (`PostgresViewStore.forPart`, one transaction per lane, as their consumers commit): each record,
 * without identity, by the record shard of its key (merged-view/record-shard.ts), with its counters;
 * its identity row (`view_record_identities`), the identity nodes and the links by the data set's
 * identity part. Reads go through the PostgresViewStore (a record's identity from its identity row).
 * After each test that passed, no identity row is left without its record (the eraser deletes both
 * together), and no record has an identity key of its own. (The contract does not hold the lanes:
 * holds are exercised by the lifecycle model tests' PostgreSQL sharded profile.)
 */
import assert from 'node:assert/strict';
import { PostgresLifecycleBackend } from '../../src/lifecycle/postgres-lifecycle-backend.js';
import { PostgresLifecycleStore } from '../../src/lifecycle/postgres-lifecycle-store.js';
import { PostgresViewEraser } from '../../src/lifecycle/postgres-view-eraser.js';
import { fixPostgresViewLayout, partitionLanes, type ViewLane } from '../../src/merged-view/postgres-view-layout.js';
import { PostgresViewStore } from '../../src/merged-view/postgres-view-store.js';
import { recordShardOf } from '../../src/merged-view/record-shard.js';
import type { ViewTransaction } from '../../src/merged-view/view-store.js';
import { createPool, migrate, type Pool } from '../../src/postgres/database.js';
import { queuePartitionOf } from '../../src/postgres/partitions.js';
import { freshDatabase, pgOnly } from '../helpers/postgres.js';
import { viewEraserContract } from './view-eraser-contract.js';

/** Tallies live in the request's row: a real pending request per test request. */
const requests = (pool: Pool) => {
  const lifecycle = new PostgresLifecycleStore(pool);
  return async () => (await lifecycle.request({ dataSetId: 'ds', kind: 'delete_event', target: 'x', suppress: false, boundSeq: 0, actor: 'test' })).id;
};

viewEraserContract(
  'PostgreSQL',
  {
    async create() {
      const url = await freshDatabase('eraser');
      await migrate(url, 'production');
      const pool = createPool(url, 'production');
      const store = new PostgresViewStore(pool);
      return { store, eraser: new PostgresViewEraser(pool), dispose: async () => (await store.close(), await pool.end()), newRequest: requests(pool) };
    },
  },
  pgOnly,
);

const S = 2;

/** The sharded view, written as its lanes' consumers would leave it (above). */
class ShardedSeedStore extends PostgresViewStore {
  readonly #lanes: (dataSetId: string) => ViewLane[];

  constructor(pool: Pool, lanes: (dataSetId: string) => ViewLane[]) {
    super(pool);
    this.#lanes = lanes;
  }

  override async transaction<T>(work: (tx: ViewTransaction) => Promise<T>): Promise<T> {
    /** Per lane (by consumer name): its store and the writes of its transaction. */
    const byLane = new Map<string, { lane: ViewLane; writes: ((tx: ViewTransaction) => Promise<void>)[] }>();
    const on = (lane: ViewLane, write: (tx: ViewTransaction) => Promise<void>) => {
      const entry = byLane.get(lane.consumer) ?? { lane, writes: [] };
      entry.writes.push(write);
      byLane.set(lane.consumer, entry);
    };
    const identityPart = (dataSetId: string) => this.#lanes(dataSetId).find((lane) => lane.role === 'identities')!;
    const shard = (dataSetId: string, recordKey: string) =>
      this.#lanes(dataSetId).find((lane) => lane.role === 'records' && lane.shard === recordShardOf(dataSetId, recordKey, S))!;
    const tx = {
      writeRecords: async (records) => {
        for (const r of records) {
          on(shard(r.dataSetId, r.recordKey), (t) => t.writeRecords([{ ...r, identityKey: null }]));
          on(identityPart(r.dataSetId), (t) =>
            t.writeRecordIdentities!([{ dataSetId: r.dataSetId, recordKey: r.recordKey, firstReceivedAt: r.firstReceivedAt, identityKey: r.identityKey }]),
          );
        }
      },
      writeIdentities: async (nodes) => {
        for (const n of nodes) on(identityPart(n.dataSetId), (t) => t.writeIdentities([n]));
      },
      linkIdentifiers: async (links) => {
        for (const l of links) on(identityPart(l.dataSetId), (t) => t.linkIdentifiers([l]));
      },
      addCounters: async (deltas) => {
        for (const d of deltas) on(this.#lanes(d.dataSetId).find((lane) => lane.role === 'records')!, (t) => t.addCounters([d]));
      },
    } as Partial<ViewTransaction> as ViewTransaction;
    const result = await work(tx);
    for (const { lane, writes } of byLane.values()) {
      await this.forPart({ consumer: lane.consumer, shard: lane.shard }).transaction(async (t) => {
        for (const write of writes) await write(t);
      });
    }
    return result;
  }
}

viewEraserContract(
  'PostgreSQL, sharded layout',
  {
    async create() {
      const url = await freshDatabase('eraser_sharded');
      await migrate(url, 'production');
      const pool = createPool(url, 'production');
      const layout = await fixPostgresViewLayout(pool, { kind: 'sharded', shards: S });
      assert.deepEqual(layout, { kind: 'sharded', shards: S });
      const store = new ShardedSeedStore(pool, (dataSetId) => partitionLanes(layout, queuePartitionOf(dataSetId)));
      const backend = new PostgresLifecycleBackend(pool);
      const eraser = await backend.viewEraser('ds');
      assert.ok(eraser instanceof PostgresViewEraser && eraser.hold, "the backend's eraser of a sharded view holds the data set's lanes");
      return {
        store,
        eraser,
        check: async () => {
          const { rows } = await pool.query<{ record: string }>(
            `SELECT i.data_set_id || '/' || i.record_key AS record FROM view_record_identities i
              WHERE NOT EXISTS (SELECT 1 FROM view_records r WHERE r.data_set_id = i.data_set_id AND r.record_key = i.record_key) ORDER BY 1`,
          );
          assert.deepEqual(rows.map((r) => r.record), [], 'no identity row is left without its record');
          const own = await pool.query<{ n: string }>('SELECT count(*) AS n FROM view_records WHERE identity_key IS NOT NULL');
          assert.equal(Number(own.rows[0]!.n), 0, 'records carry no identity of their own: it is read from their identity rows');
        },
        dispose: async () => {
          await backend.close();
          await store.close();
          await pool.end();
        },
        newRequest: requests(pool),
      };
    },
  },
  pgOnly,
);
