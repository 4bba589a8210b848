/**
 * A PostgreSQL worker's hot identifier links (merged-view/postgres-hot-links.ts) against the
 * database it mirrors (skipped without ECAPI_TEST_DATABASE_URL): every answer the hot links give
 * must be the one a SELECT gives at that moment, after the lane's own commits, a rolled-back batch,
 * another worker's batches on the same lane, the eraser's deletions, and a data set loaded through
 * several pages of its cursor or too large for the bound. The lifecycle's model test
 * (test/lifecycle/deletion-model.test.ts) runs the PostgreSQL lanes with hot links as well.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PostgresViewStore } from '../../src/merged-view/postgres-view-store.js';
import { PostgresViewEraser } from '../../src/lifecycle/postgres-view-eraser.js';
import type { Pool } from '../../src/postgres/database.js';
import { pairKey, type ViewTransaction } from '../../src/merged-view/view-store.js';
import { migratedPool, pgOnly } from '../helpers/postgres.js';

const LANE = 'merged-view/p03';
const DS = 'shop';
const id = (n: number) => `email:${n.toString(16).padStart(64, '0')}`;

/** One batch as the consumer runs it: the offset locked first, the lookups, then the writes. */
async function batch(
  store: PostgresViewStore,
  ask: number[],
  link: Array<[number, string]> = [],
  options: { fail?: boolean } = {},
): Promise<Map<string, string>> {
  return store.transaction(async (tx: ViewTransaction) => {
    const at = await tx.offset(LANE);
    // A batch with nothing to look up does not ask (as one whose records were all suppressed).
    const found = ask.length > 0 ? await tx.loadIdentifierLinks(ask.map((n) => ({ dataSetId: DS, identifier: id(n) }))) : new Map<string, string>();
    if (link.length > 0) await tx.linkIdentifiers(link.map(([n, key]) => ({ dataSetId: DS, identifier: id(n), identityKey: key })));
    await tx.setOffset(LANE, at + 10);
    if (options.fail) throw new Error('rolled back before its commit');
    return found;
  });
}

/** What a SELECT of the database answers for `ask` (a store without hot links). */
async function truth(pool: Pool, ask: number[]): Promise<Map<string, string>> {
  return new PostgresViewStore(pool).transaction((tx) => tx.loadIdentifierLinks(ask.map((n) => ({ dataSetId: DS, identifier: id(n) }))));
}

const sorted = (m: Map<string, string>) => [...m].sort(([a], [b]) => (a < b ? -1 : 1));

test('hot links answer as the database does: own commits, a rolled-back batch, another worker on the lane, an erasure', pgOnly, async () => {
  const pool = await migratedPool('hot');
  try {
    const base = new PostgresViewStore(pool);
    const worker = base.withHotLinks(1_000);
    const other = base.withHotLinks(1_000); // a second worker process that leases the same lane for a while
    const ask = [1, 2, 3, 4, 5, 6, 7];
    const check = async (store: PostgresViewStore, link: Array<[number, string]> = []) => {
      const expected = await truth(pool, ask);
      const got = await batch(store, ask, link);
      assert.deepEqual(sorted(got), sorted(expected));
    };

    await check(worker, [[1, 'ik_1'], [2, 'ik_1']]);
    await check(worker, [[3, 'ik_11']]);
    assert.deepEqual(await truth(pool, [1, 2, 3]), new Map([[pairKey(DS, id(1)), 'ik_1'], [pairKey(DS, id(2)), 'ik_1'], [pairKey(DS, id(3)), 'ik_11']]));
    const afterOwn = worker.hotStats()!;
    assert.equal(afterOwn.loads, 1, 'loaded once, then kept up to date by its own commits');
    assert.equal(afterOwn.misses, 0);
    assert.equal(afterOwn.links, 3);

    // A batch that links and rolls back leaves nothing behind, in the database or in memory.
    await assert.rejects(batch(worker, ask, [[4, 'ik_21']], { fail: true }));
    await check(worker);
    assert.equal(worker.hotStats()!.links, 3);

    // Another worker applies the lane's next batch: this worker's memory of the lane is stale.
    await check(other, [[5, 'ik_31']]);
    await check(worker);
    assert.equal(worker.hotStats()!.loads, 2, 'reloaded after another worker moved the lane');
    // Again, and this worker's first batch after it asks about no identifier (nothing to answer, nothing
    // loaded): its commit must not vouch for what it remembers of the lane.
    await check(other, [[6, 'ik_32']]);
    await batch(worker, []);
    await check(worker);
    assert.equal(worker.hotStats()!.loads, 3, 'reloaded: another worker moved the lane before a batch without lookups');

    // The eraser deletes an identity's links (and bumps the data set's generation).
    await pool.query("INSERT INTO identity_nodes (data_set_id, identity_key, parent, created_seq, event_count, identifier_count) VALUES ($1, 'ik_1', NULL, 1, 0, 2)", [DS]);
    await new PostgresViewEraser(pool).deleteIdentity(1, DS, 'ik_1');
    assert.equal((await truth(pool, [1, 2])).size, 0, 'the erasure deleted the links');
    await check(worker, [[1, 'ik_41']]);
    assert.equal(worker.hotStats()!.loads, 4, 'reloaded after the erasure');
    await check(worker);
    assert.equal(worker.hotStats()!.misses, 0, 'every lookup answered from memory');
  } finally {
    await pool.end();
  }
});

test('a data set loaded over several pages of its cursor is held completely; one past the bound is read from the database', pgOnly, async () => {
  const pool = await migratedPool('hot');
  try {
    const n = 45_000; // more than two pages
    await pool.query(
      "INSERT INTO identity_identifiers (data_set_id, identifier, identity_key) SELECT $1, 'email:' || lpad(to_hex(i), 64, '0'), 'ik_' || (i % 977 + 1) FROM generate_series(1, $2) AS i",
      [DS, n],
    );
    const ask = [1, 2, 20_000, 20_001, 40_001, n, n + 1, n + 2];
    const expected = await truth(pool, ask);
    assert.equal(expected.size, 6);

    const held = new PostgresViewStore(pool).withHotLinks(100_000);
    assert.deepEqual(sorted(await batch(held, ask)), sorted(expected));
    const stats = held.hotStats()!;
    assert.deepEqual([stats.loaded, stats.links, stats.hits, stats.misses], [n, n, ask.length, 0]);

    const tooSmall = new PostgresViewStore(pool).withHotLinks(n - 1);
    assert.deepEqual(sorted(await batch(tooSmall, ask)), sorted(expected));
    const small = tooSmall.hotStats()!;
    assert.deepEqual([small.links, small.hits, small.misses], [0, 0, ask.length]);
  } finally {
    await pool.end();
  }
});
