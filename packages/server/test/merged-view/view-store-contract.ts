/**
 * The ViewStore and IngestStatsStore contracts, written once and run against both backends
 * (sqlite-view-store.test.ts in `npm test`; postgres-view-store.test.ts in `.ci/run` with
 * ECAPI_TEST_DATABASE_URL): a batch's writes and its offset commit together or not at all, records
 * and identities read back exactly, chained reparenting within one batch, identifier links,
 * counters summed per hour (whole numbers; gone at zero), export order and paging, heartbeats, ingest counters.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pairKey, type IdentityNode, type IngestStatsStore, type MergedRecord, type ViewStore } from '../../src/merged-view/view-store.js';

export interface StoreFactory<S> {
  /** A fresh, empty store; `dispose` closes it and whatever it was opened on. */
  create(): Promise<{ store: S; dispose: () => Promise<void> }>;
}

const HOUR = 3_600_000;
const T0 = 1_700_000_000_000 - (1_700_000_000_000 % HOUR);

function record(dataSetId: string, id: string, seq: number, extra: Partial<MergedRecord> = {}): MergedRecord {
  return {
    dataSetId,
    recordKey: `id:${id}`,
    eventId: id,
    firstSeq: seq,
    lastSeq: seq,
    firstReceivedAt: T0 + seq,
    lastReceivedAt: T0 + seq,
    mergedCount: 1,
    identityKey: null,
    measurementOnly: false,
    event: { id, event_type: 'purchase', value: 1.5, nested: { list: [1, 'two', null] } },
    ...extra,
  };
}

function node(dataSetId: string, identityKey: string, parent: string | null, createdSeq: number, eventCount = 1): IdentityNode {
  return { dataSetId, identityKey, parent, createdSeq, eventCount, identifierCount: 1 };
}

export function viewStoreContract(backend: string, factory: StoreFactory<ViewStore>, options: { skip?: string | false } = {}): void {
  const run = (name: string, fn: (store: ViewStore) => Promise<void>) =>
    test(`${backend} view store: ${name}`, { skip: options.skip ?? false }, async () => {
      const { store, dispose } = await factory.create();
      try {
        await fn(store);
      } finally {
        await dispose();
      }
    });

  run('a batch commits its writes and its offset together; a failed batch leaves nothing', async (store) => {
    assert.equal(await store.offset('c'), 1, 'a fresh store starts at 1');
    await store.transaction(async (tx) => {
      assert.equal(await tx.offset('c'), 1);
      await tx.writeRecords([record('ds', 'a', 1), record('ds', 'b', 2)]);
      await tx.setOffset('c', 3);
    });
    assert.equal(await store.offset('c'), 3);
    await assert.rejects(
      store.transaction(async (tx) => {
        await tx.writeRecords([record('ds', 'c', 3)]);
        await tx.addCounters([{ dataSetId: 'ds', hour: T0, name: 'events', n: 5 }]);
        await tx.setOffset('c', 4);
        throw new Error('consumer died mid-batch');
      }),
      /consumer died mid-batch/,
    );
    assert.equal(await store.offset('c'), 3, 'the offset did not move');
    assert.equal(await store.getRecord('ds', 'id:c'), null, 'the record was not written');
    assert.deepEqual(await store.counters('ds', 0), [], 'the counters were not written');
    assert.equal(await store.offset('other'), 1, 'offsets are per consumer');
  });

  run('records read back exactly, inside and outside a batch; a write replaces', async (store) => {
    const a = record('ds', 'a', 1, { identityKey: 'i1', measurementOnly: true });
    await store.transaction(async (tx) => tx.writeRecords([a, record('other', 'a', 2)]));
    assert.deepEqual(await store.getRecord('ds', 'id:a'), a);
    const merged = { ...a, lastSeq: 7, lastReceivedAt: T0 + 7, mergedCount: 2, event: { ...a.event, value: 2 } };
    await store.transaction(async (tx) => {
      const loaded = await tx.loadRecords([{ dataSetId: 'ds', recordKey: 'id:a' }, { dataSetId: 'ds', recordKey: 'id:missing' }]);
      assert.deepEqual([...loaded.keys()], [pairKey('ds', 'id:a')]);
      assert.deepEqual(loaded.get(pairKey('ds', 'id:a')), a);
      await tx.writeRecords([merged]);
    });
    assert.deepEqual(await store.getRecord('ds', 'id:a'), merged);
    assert.equal((await store.getRecord('other', 'id:a'))!.firstSeq, 2, 'data sets are separate');
  });

  run("every record of a batch keeps its own event, byte-exact whatever its strings hold", async (store) => {
    // Quotes, backslashes, control characters, NUL, a lone surrogate, astral characters, long text:
    // what a sender may put in a custom field. On PostgreSQL the batch's events travel as one JSON
    // array of strings beside the other columns' arrays; each must land on its own record.
    const hostile = ['"', '\\', '\\"', '\u0000', '\n\t\r', '\ud800', '\udfff x', '😀 ©', '[{"a":1}]', ',', '{', 'NULL', 'x'.repeat(5_000)];
    const records = Array.from({ length: 300 }, (_, i) =>
      record('ds', `e${i}`, i + 1, { event: { id: `e${i}`, i, note: hostile[i % hostile.length]!.repeat(1 + (i % 3)), nested: { s: hostile[(i * 7) % hostile.length] } } }),
    );
    await store.transaction(async (tx) => tx.writeRecords(records));
    for (const r of records) assert.deepEqual(await store.getRecord('ds', r.recordKey), r, r.recordKey);
    const reloaded = await store.transaction(async (tx) => tx.loadRecords(records.map((r) => ({ dataSetId: 'ds', recordKey: r.recordKey }))));
    for (const r of records) assert.deepEqual(reloaded.get(pairKey('ds', r.recordKey)), r, r.recordKey);
  });

  run('identities: links, chained reparenting in one batch, resolve and read an identity', async (store) => {
    await store.transaction(async (tx) => {
      await tx.writeIdentities([node('ds', 'a', null, 1, 2), node('ds', 'b', null, 2), node('ds', 'c', null, 3, 3), node('ds', 'x', 'a', 4), node('ds', 'y', 'b', 5)]);
      await tx.linkIdentifiers([
        { dataSetId: 'ds', identifier: 'email:1', identityKey: 'a' },
        { dataSetId: 'ds', identifier: 'phone:2', identityKey: 'b' },
        { dataSetId: 'ds', identifier: 'maid:3', identityKey: 'c' },
        { dataSetId: 'other', identifier: 'email:1', identityKey: 'z' },
      ]);
    });
    assert.equal(await store.resolveIdentity('ds', 'x'), 'a');
    assert.equal(await store.resolveIdentity('ds', 'nosuch'), null);
    // c absorbs b, then a absorbs c: every node under b or c ends under a, in one batch.
    await store.transaction(async (tx) => {
      await tx.writeIdentities([node('ds', 'b', 'c', 2), node('ds', 'c', 'a', 3), node('ds', 'a', null, 1, 6)]);
      await tx.reparentIdentities([
        { dataSetId: 'ds', from: 'b', to: 'c' },
        { dataSetId: 'ds', from: 'c', to: 'a' },
      ]);
      const links = await tx.loadIdentifierLinks([{ dataSetId: 'ds', identifier: 'email:1' }, { dataSetId: 'ds', identifier: 'none' }]);
      assert.deepEqual([...links], [[pairKey('ds', 'email:1'), 'a']]);
      const nodes = await tx.loadIdentities([{ dataSetId: 'ds', identityKey: 'y' }, { dataSetId: 'ds', identityKey: 'a' }]);
      assert.equal(nodes.get(pairKey('ds', 'y'))!.parent, 'a');
      assert.deepEqual(nodes.get(pairKey('ds', 'a')), node('ds', 'a', null, 1, 6));
    });
    for (const key of ['a', 'b', 'c', 'x', 'y']) assert.equal(await store.resolveIdentity('ds', key), 'a', key);
    const identity = await store.getIdentity('ds', 'y');
    assert.deepEqual(identity, {
      requestedKey: 'y',
      identityKey: 'a',
      dataSetId: 'ds',
      eventCount: 6,
      identifiers: ['email:1', 'maid:3', 'phone:2'],
      absorbedKeys: ['b', 'c', 'x', 'y'],
    });
    assert.equal(await store.getIdentity('ds', 'nosuch'), null);
    // A link can move to another identity.
    await store.transaction(async (tx) => tx.linkIdentifiers([{ dataSetId: 'ds', identifier: 'email:1', identityKey: 'c' }]));
    await store.transaction(async (tx) => {
      assert.equal((await tx.loadIdentifierLinks([{ dataSetId: 'ds', identifier: 'email:1' }])).get(pairKey('ds', 'email:1')), 'c');
    });
  });

  run('counters add up per data set, hour and name; a counter brought to zero is gone', async (store) => {
    await store.transaction(async (tx) =>
      tx.addCounters([
        { dataSetId: 'ds', hour: T0, name: 'events', n: 2 },
        { dataSetId: 'ds', hour: T0 + HOUR, name: 'events', n: 1 },
        { dataSetId: 'ds', hour: T0, name: 'value:USD', n: 1050 },
        { dataSetId: 'other', hour: T0, name: 'events', n: 9 },
      ]),
    );
    await store.transaction(async (tx) =>
      tx.addCounters([
        { dataSetId: 'ds', hour: T0, name: 'events', n: 3 },
        { dataSetId: 'ds', hour: T0, name: 'value:USD', n: -1050 },
      ]),
    );
    const sorted = (rows: { hour: number; name: string; n: number }[]) => [...rows].sort((x, y) => x.hour - y.hour || x.name.localeCompare(y.name));
    assert.deepEqual(sorted(await store.counters('ds', 0)), [
      { hour: T0, name: 'events', n: 5 },
      { hour: T0 + HOUR, name: 'events', n: 1 },
    ]);
    assert.deepEqual(await store.counters('ds', T0 + HOUR), [{ hour: T0 + HOUR, name: 'events', n: 1 }], 'from the given hour on');
  });

  run('export: records updated since a time, in order of first arrival, page by page', async (store) => {
    const records = Array.from({ length: 2500 }, (_, i) => record('ds', `e${String(i).padStart(5, '0')}`, i + 1));
    await store.transaction(async (tx) => tx.writeRecords([...records, record('other', 'x', 9999)]));
    const pages: number[] = [];
    const seen: string[] = [];
    await store.exportRecords('ds', 0, (page) => {
      pages.push(page.length);
      for (const r of page) seen.push(r.eventId!);
    });
    assert.deepEqual(seen, records.map((r) => r.eventId));
    assert.ok(pages.length >= 3 && pages.every((n) => n <= 1000), `pages of ${pages.join(', ')}`);
    const recent: string[] = [];
    await store.exportRecords('ds', T0 + 2401, (page) => void recent.push(...page.map((r) => r.eventId!)));
    assert.deepEqual(recent, records.slice(2400).map((r) => r.eventId));
    let none = 0;
    await store.exportRecords('nosuch', 0, () => void none++);
    assert.equal(none, 0);
  });

  run('heartbeats: the last one per consumer', async (store) => {
    assert.equal(await store.lastHeartbeat('c'), null);
    await store.heartbeat({ consumer: 'c', pid: 10, at: T0 });
    await store.heartbeat({ consumer: 'c', pid: 11, at: T0 + 1000 });
    assert.deepEqual(await store.lastHeartbeat('c'), { consumer: 'c', pid: 11, at: T0 + 1000 });
  });
}

export function ingestStatsContract(backend: string, factory: StoreFactory<IngestStatsStore>, options: { skip?: string | false } = {}): void {
  test(`${backend} ingest stats: outcome counts add up per data set, hour and name, from an hour on`, { skip: options.skip ?? false }, async () => {
    const { store, dispose } = await factory.create();
    try {
      assert.deepEqual(await store.counters('ds', 0), []);
      await store.add([
        { dataSetId: 'ds', hour: T0, name: 'accepted', n: 3 },
        { dataSetId: 'ds', hour: T0, name: 'rejected:INVALID_EVENT', n: 1 },
        { dataSetId: 'other', hour: T0, name: 'accepted', n: 7 },
      ]);
      await store.add([
        { dataSetId: 'ds', hour: T0, name: 'accepted', n: 2 },
        { dataSetId: 'ds', hour: T0 + HOUR, name: 'accepted', n: 1 },
      ]);
      await store.add([]);
      const sorted = (rows: { hour: number; name: string; n: number }[]) => [...rows].sort((x, y) => x.hour - y.hour || x.name.localeCompare(y.name));
      assert.deepEqual(sorted(await store.counters('ds', 0)), [
        { hour: T0, name: 'accepted', n: 5 },
        { hour: T0, name: 'rejected:INVALID_EVENT', n: 1 },
        { hour: T0 + HOUR, name: 'accepted', n: 1 },
      ]);
      assert.deepEqual(await store.counters('ds', T0 + HOUR), [{ hour: T0 + HOUR, name: 'accepted', n: 1 }]);
      assert.deepEqual(await store.counters('other', 0), [{ hour: T0, name: 'accepted', n: 7 }]);
    } finally {
      await dispose();
    }
  });
}
