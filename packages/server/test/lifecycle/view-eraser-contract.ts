/**
 * The ViewEraser contract (lifecycle/lifecycle-backend.ts), written once and run against both
 * backends (sqlite-view-eraser.test.ts in `npm test`; postgres-view-eraser.test.ts with
 * ECAPI_TEST_DATABASE_URL): retention by last update with identity accounting (an identity keeps
 * its other records; it goes, absorbed nodes and links included, with its last one), one record
 * by key, an identity found by identifier or by an absorbed key, its records deleted page by page.
 * Other data sets and the counters are never touched. A request's deletions (issue 29) cover only
 * records first queued up to its bound, are counted in its tally (exact whatever attempt made them),
 * name every deleted record with the last position merged into it (whose queued copies go too), and
 * keep an identity that still has records; one record deleted from such an identity takes the
 * identifier links only it carried with it (normalized as the consumer links them), the others stay.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ErasedRecord, EraserCursor, ViewEraser } from '../../src/lifecycle/lifecycle-backend.js';
import type { IdentityNode, MergedRecord, ViewStore } from '../../src/merged-view/view-store.js';

export interface EraserFactory {
  /**
   * A fresh view: the store writes the state, the eraser deletes from it; `check`: the backend's own
   * invariants, asserted after each test that passed (e.g. the sharded PostgreSQL layout: no
   * record identity row left without its record).
   */
  create(): Promise<{ store: ViewStore; eraser: ViewEraser; dispose: () => Promise<void>; newRequest: () => Promise<number>; check?: () => Promise<void> }>;
}

const T0 = 1_700_000_000_000;

const byEventId = (erased: readonly ErasedRecord[]) => [...erased].sort((a, b) => (a.eventId < b.eventId ? -1 : 1));

function record(dataSetId: string, id: string, seq: number, lastReceivedAt: number, identityKey: string | null, lastSeq = seq): MergedRecord {
  return {
    dataSetId, recordKey: `id:${id}`, eventId: id, firstSeq: seq, lastSeq, firstReceivedAt: lastReceivedAt, lastReceivedAt,
    mergedCount: 1, identityKey, measurementOnly: false, event: { id },
  };
}

const node = (dataSetId: string, identityKey: string, parent: string | null, createdSeq: number, eventCount: number): IdentityNode =>
  ({ dataSetId, identityKey, parent, createdSeq, eventCount, identifierCount: 1 });

/**
 * ds: identity ik_1 (absorbed ik_3; links email:a → ik_1, email:c → ik_3) with records r1 (old) and
 * r3 (new); identity ik_2 (link phone:b) with r2 (old) only; r4 (old) without identity. other: r1 (old).
 */
async function seed(store: ViewStore): Promise<void> {
  await store.transaction(async (tx) => {
    await tx.writeRecords([
      record('ds', 'r1', 1, T0, 'ik_1'),
      record('ds', 'r2', 2, T0 + 10, 'ik_2'),
      record('ds', 'r3', 3, T0 + 5000, 'ik_3', 7),
      record('ds', 'r4', 4, T0 + 20, null),
      record('other', 'r1', 5, T0, null),
    ]);
    await tx.writeIdentities([node('ds', 'ik_1', null, 1, 2), node('ds', 'ik_3', 'ik_1', 3, 0), node('ds', 'ik_2', null, 2, 1)]);
    await tx.linkIdentifiers([
      { dataSetId: 'ds', identifier: 'email:a', identityKey: 'ik_1' },
      { dataSetId: 'ds', identifier: 'email:c', identityKey: 'ik_3' },
      { dataSetId: 'ds', identifier: 'phone:b', identityKey: 'ik_2' },
    ]);
    await tx.addCounters([{ dataSetId: 'ds', hour: T0 - (T0 % 3_600_000), name: 'events', n: 4 }]);
  });
}

/** A 64-hex digest as senders send them (lowercase), from one letter. */
const digest = (c: string) => c.repeat(64);

/**
 * ds `links`: identity ik_10 (absorbed ik_11) with records q1 (ik_10: emails E and S, phone P) and
 * q2 (ik_11: email S in upper case, uid U); links email:E, phone:P → ik_10, email:S, uid:U → ik_11.
 */
async function seedLinks(store: ViewStore): Promise<void> {
  const withUserData = (r: MergedRecord, userData: Record<string, unknown>): MergedRecord => ({ ...r, event: { ...r.event, user_data: userData } });
  await store.transaction(async (tx) => {
    await tx.writeRecords([
      withUserData(record('links', 'q1', 20, T0, 'ik_10'), { email_address: [digest('e'), digest('5')], phone_numbers: [digest('b')] }),
      withUserData(record('links', 'q2', 21, T0, 'ik_11'), { email_address: [digest('5').toUpperCase()], uids: [{ id: 'u-1', source: 'crm' }] }),
    ]);
    await tx.writeIdentities([node('links', 'ik_10', null, 20, 2), node('links', 'ik_11', 'ik_10', 21, 0)]);
    await tx.linkIdentifiers([
      { dataSetId: 'links', identifier: `email:${digest('e')}`, identityKey: 'ik_10' },
      { dataSetId: 'links', identifier: `phone:${digest('b')}`, identityKey: 'ik_10' },
      { dataSetId: 'links', identifier: `email:${digest('5')}`, identityKey: 'ik_11' },
      { dataSetId: 'links', identifier: 'uid:u-1', identityKey: 'ik_11' },
    ]);
  });
}

export function viewEraserContract(backend: string, factory: EraserFactory, options: { skip?: string | false } = {}): void {
  const run = (name: string, fn: (store: ViewStore, eraser: ViewEraser, newRequest: () => Promise<number>) => Promise<void>) =>
    test(`${backend} view eraser: ${name}`, { skip: options.skip ?? false }, async () => {
      const { store, eraser, dispose, newRequest, check } = await factory.create();
      try {
        await seed(store);
        await fn(store, eraser, newRequest);
        await check?.();
      } finally {
        await dispose();
      }
    });

  run('retention deletes records last updated before the cutoff, in batches; identities go with their last record', async (store, eraser) => {
    const first = await eraser.expire('ds', T0 + 1000, 2);
    assert.equal(first.records, 2, 'at most the limit');
    assert.ok(first.heldMs >= 0);
    const second = await eraser.expire('ds', T0 + 1000, 2);
    assert.equal(second.records, 1);
    assert.equal((await eraser.expire('ds', T0 + 1000, 2)).records, 0);
    for (const id of ['r1', 'r2', 'r4']) assert.equal(await store.getRecord('ds', `id:${id}`), null, id);
    assert.ok(await store.getRecord('ds', 'id:r3'), 'updated after the cutoff: kept');
    assert.ok(await store.getRecord('other', 'id:r1'), 'another data set: untouched');
    // ik_1 lost r1 but keeps r3 (and its absorbed ik_3 and both links); ik_2 lost its only record.
    const kept = await store.getIdentity('ds', 'ik_3');
    assert.equal(kept?.identityKey, 'ik_1');
    assert.equal(kept?.eventCount, 1);
    assert.deepEqual(kept?.identifiers, ['email:a', 'email:c']);
    assert.equal(await store.getIdentity('ds', 'ik_2'), null);
    assert.equal(first.identities + second.identities, 1);
    assert.equal(first.links + second.links, 1);
    assert.deepEqual((await store.counters('ds', 0)).map((c) => c.n), [4], 'counters stay');
    // Then the last one: the whole tree and its links go.
    const last = await eraser.expire('ds', T0 + 10_000, 10);
    assert.deepEqual({ records: last.records, identities: last.identities, links: last.links }, { records: 1, identities: 2, links: 2 });
    assert.equal(await store.getIdentity('ds', 'ik_1'), null);
    assert.equal(await store.getIdentity('ds', 'ik_3'), null);
  });

  const counts = async (eraser: ViewEraser, request: number) => {
    const t = await eraser.tally(request);
    return { records: t.records, identities: t.identities, links: t.links };
  };

  run('one record by key, if first queued up to the bound; its identity goes when it was the last record; counted in the tally', async (store, eraser, newRequest) => {
    const req = await newRequest();
    await eraser.deleteRecord(req, 'ds', 'id:r2', 10);
    assert.deepEqual(await counts(eraser, req), { records: 1, identities: 1, links: 1 });
    assert.equal(await store.getRecord('ds', 'id:r2'), null);
    assert.equal(await store.getIdentity('ds', 'ik_2'), null);
    await eraser.deleteRecord(req, 'ds', 'id:r1', 10);
    assert.deepEqual(await counts(eraser, req), { records: 2, identities: 1, links: 1 }, 'the tally adds up');
    assert.equal((await store.getIdentity('ds', 'ik_1'))?.eventCount, 1);
    await eraser.deleteRecord(req, 'ds', 'id:nope', 10);
    const other = await newRequest();
    await eraser.deleteRecord(other, 'ds', 'id:r4', 3);
    assert.ok(await store.getRecord('ds', 'id:r4'), 'first queued (seq 4) after the bound (3): kept');
    assert.deepEqual(await counts(eraser, other), { records: 0, identities: 0, links: 0 });
    const named = await eraser.tally(req);
    assert.deepEqual({ maxSeq: named.maxSeq, erased: byEventId(named.erased) }, { maxSeq: 2, erased: [{ eventId: 'r1', lastSeq: 1 }, { eventId: 'r2', lastSeq: 2 }] }, 'each deleted record named with its last position');
    await eraser.deleteRecord(other, 'ds', 'id:r3', 5);
    const straddled = await eraser.tally(other);
    assert.deepEqual({ maxSeq: straddled.maxSeq, erased: straddled.erased }, { maxSeq: 7, erased: [{ eventId: 'r3', lastSeq: 7 }] }, 'r3 (seq 3..7) merged an event after the bound: its copies up to 7 go');
    await eraser.clearTally(req);
  });

  run('an identity by identifier or by an absorbed key; its records first queued up to the bound, page by page; then its tree once empty', async (store, eraser, newRequest) => {
    assert.equal(await eraser.findIdentity('ds', { identifier: 'email:zzz' }), null);
    assert.equal(await eraser.findIdentity('other', { identifier: 'email:a' }), null, 'per data set');
    const byIdentifier = await eraser.findIdentity('ds', { identifier: 'email:c' });
    assert.deepEqual({ ...byIdentifier, keys: byIdentifier?.keys.slice().sort() }, { root: 'ik_1', keys: ['ik_1', 'ik_3'], identifiers: ['email:a', 'email:c'] });
    assert.deepEqual(await eraser.findIdentity('ds', { identityKey: 'ik_3' }), byIdentifier);
    const identity = { root: byIdentifier!.root, keys: new Set(byIdentifier!.keys) };
    const deleteAll = async (request: number, bound: number) => {
      let pages = 0;
      for (let after: EraserCursor | null = 0; after !== null; pages++) after = (await eraser.deleteIdentityRecords(request, 'ds', identity, bound, after, 2)).next;
      return pages;
    };
    // Bound 2: r1 (seq 1) goes, r3 (first queued at 3) stays, and so does the identity with its links.
    const early = await newRequest();
    await deleteAll(early, 2);
    await eraser.deleteIdentity(early, 'ds', 'ik_1');
    assert.deepEqual(await counts(eraser, early), { records: 1, identities: 0, links: 0 });
    assert.equal(await store.getRecord('ds', 'id:r1'), null);
    assert.ok(await store.getRecord('ds', 'id:r3'));
    assert.equal((await store.getIdentity('ds', 'ik_1'))?.eventCount, 1, 'one record left');
    // Bound 10: r3 too (it merged seq 7: a straddler), then the tree.
    const late = await newRequest();
    assert.ok((await deleteAll(late, 10)) >= 1);
    await eraser.deleteIdentity(late, 'ds', 'ik_1');
    const t = await eraser.tally(late);
    assert.deepEqual({ records: t.records, identities: t.identities, links: t.links, erased: t.erased, maxSeq: t.maxSeq }, { records: 1, identities: 2, links: 2, erased: [{ eventId: 'r3', lastSeq: 7 }], maxSeq: 7 });
    assert.deepEqual((await eraser.tally(early)).erased, [{ eventId: 'r1', lastSeq: 1 }]);
    assert.ok(await store.getRecord('ds', 'id:r2'), "another identity's record stays");
    assert.ok(await store.getRecord('ds', 'id:r4'));
    assert.equal(await store.getIdentity('ds', 'ik_3'), null);
    assert.ok(await store.getIdentity('ds', 'ik_2'));
  });
  run('one record by key: an identity that keeps other records loses the identifier links only that record carried', async (store, eraser, newRequest) => {
    await seedLinks(store);
    const req = await newRequest();
    await eraser.deleteRecord(req, 'links', 'id:q1', 100);
    assert.equal(await store.getRecord('links', 'id:q1'), null);
    assert.deepEqual(await counts(eraser, req), { records: 1, identities: 0, links: 2 }, 'email E and phone P: q1 alone carried them');
    const kept = await store.getIdentity('links', 'ik_10');
    assert.equal(kept?.eventCount, 1);
    assert.deepEqual(kept?.identifiers, [`email:${digest('5')}`, 'uid:u-1'], 'email S stays: q2 carries it (in upper case, normalized)');
    assert.equal(await store.identityOfIdentifier('links', `phone:${digest('b')}`), null, 'the phone only q1 carried no longer resolves');
    assert.equal(await store.identityOfIdentifier('links', `email:${digest('e')}`), null);
    assert.equal(await eraser.findIdentity('links', { identifier: `email:${digest('e')}` }), null);
    assert.equal(await store.identityOfIdentifier('links', `email:${digest('5')}`), 'ik_11');
    // Then its last record: the identity goes with the links left, counted once.
    await eraser.deleteRecord(req, 'links', 'id:q2', 100);
    assert.deepEqual(await counts(eraser, req), { records: 2, identities: 2, links: 4 });
    assert.equal(await store.getIdentity('links', 'ik_10'), null);
    // The other data set's identities are untouched.
    assert.deepEqual((await store.getIdentity('ds', 'ik_1'))?.identifiers, ['email:a', 'email:c']);
  });
}
