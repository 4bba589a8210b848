/**
 * The consumer over an in-memory queue and a real SQLite view store: merge by (data_set_id, id),
 * events without id, the merge window, identity linking, analytics against independent counts,
 * and independence from batch boundaries.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { SqliteViewStore } from '../../src/merged-view/sqlite-view-store.js';
import { ViewConsumer } from '../../src/consumer/view-consumer.js';
import { hourOf } from '../../src/model/hourly-counters.js';
import { toMicros } from '../../src/merged-view/record-counters.js';
import { statsDocument } from '../../src/analytics/stats-document.js';
import { recordKeyForId } from '../../src/merged-view/merge.js';
import { ArrayQueueSource, dumpView } from '../helpers/view-dump.js';
import { generateEvents, sha } from '../helpers/event-generator.js';
import { tempDataDir } from '../helpers/server-process.js';

const DAY = 86_400_000;
const T0 = Date.UTC(2025, 4, 6, 19, 5);

function setup(options: { windowMs?: number; batchSize?: number } = {}) {
  const file = join(tempDataDir('ecapi-view-'), 'view.db');
  const store = new SqliteViewStore(file);
  const queue = new ArrayQueueSource();
  const consumer = new ViewConsumer(store, queue, { mergeWindowMs: () => options.windowMs ?? 7 * DAY, batchSize: options.batchSize ?? 1000 });
  return { file, store, queue, consumer };
}

const ev = (id: string | undefined, extra: Record<string, unknown> = {}) => ({
  data_set_id: 'ds', ...(id === undefined ? {} : { id }), timestamp: 1_746_558_464, event_type: 'purchase', ...extra,
});

test('a re-sent event merges into one record by the documented rule', async () => {
  for (const batchSize of [1, 1000]) {
    const { store, queue, consumer } = setup({ batchSize });
    queue.push({ received_at: T0, data_set_id: 'ds', event: ev('o1', { value: 10, currency_code: 'USD', source: 'website', user_data: { email_address: [sha('a')], customer_segments: ['gold'] }, properties: { page_url: 'p1', transaction_id: 't1' } }) });
    queue.push({ received_at: T0 + 1000, data_set_id: 'ds', event: ev('o1', { value: 12, currency_code: 'USD', user_data: { email_address: [sha('b'), sha('a')], customer_segments: ['silver'] }, properties: { page_url: 'p2' } }) });
    queue.push({ received_at: T0 + 2000, data_set_id: 'other', event: { ...ev('o1'), data_set_id: 'other' } });
    assert.equal(await consumer.drain(), 3);
    const record = await store.getRecord('ds', recordKeyForId('o1'));
    assert.ok(record);
    assert.equal(record.mergedCount, 2);
    assert.equal(record.firstReceivedAt, T0);
    assert.equal(record.lastReceivedAt, T0 + 1000);
    assert.equal(record.firstSeq, 1);
    assert.equal(record.lastSeq, 2);
    assert.deepEqual(record.event, ev('o1', {
      value: 12, currency_code: 'USD', source: 'website',
      user_data: { email_address: [sha('a'), sha('b')], customer_segments: ['silver'] },
      properties: { page_url: 'p2', transaction_id: 't1' },
    }));
    // Same id in another data set: another event.
    assert.equal((await store.getRecord('other', recordKeyForId('o1')))!.mergedCount, 1);
    const stats = statsDocument('ds', 0, await store.counters('ds', 0));
    assert.equal(stats.totals.events, 1);
    assert.equal(stats.totals.received, 2);
    assert.equal(stats.totals.merged_duplicates, 1);
    assert.deepEqual(stats.totals.value_by_currency, { USD: 12 });
    // Applying again from the start (at-least-once redelivery) is refused by the offset.
    assert.equal(await consumer.drain(), 0);
    await store.close();
  }
});

test('events without id stay separate records', async () => {
  const { store, queue, consumer } = setup();
  for (let i = 0; i < 3; i++) queue.push({ received_at: T0, data_set_id: 'ds', event: ev(undefined, { value: 1, currency_code: 'USD' }) });
  await consumer.drain();
  const records: unknown[] = [];
  await store.exportRecords('ds', 0, (page) => void records.push(...page));
  assert.equal(records.length, 3);
  const stats = statsDocument('ds', 0, await store.counters('ds', 0));
  assert.equal(stats.totals.events, 3);
  assert.deepEqual(stats.totals.value_by_currency, { USD: 3 });
  assert.ok(await store.getRecord('ds', 'seq:2'));
  await store.close();
});

test('merge window: measured from first_received_at; a later arrival is discarded and counted', async () => {
  const HOUR = 3_600_000;
  const { store, queue, consumer } = setup({ windowMs: HOUR, batchSize: 2 });
  queue.push({ received_at: T0, data_set_id: 'ds', event: ev('o1', { value: 1, currency_code: 'USD' }) });
  queue.push({ received_at: T0 + 50 * 60_000, data_set_id: 'ds', event: ev('o1', { value: 2, currency_code: 'USD' }) });
  queue.push({ received_at: T0 + 70 * 60_000, data_set_id: 'ds', event: ev('o1', { value: 3, currency_code: 'USD' }) });
  queue.push({ received_at: T0 + 70 * 60_000, data_set_id: 'ds', event: ev('o2', { value: 5, currency_code: 'USD' }) });
  await consumer.drain();
  const record = (await store.getRecord('ds', recordKeyForId('o1')))!;
  assert.equal(record.mergedCount, 2);
  assert.equal(record.event.value, 2);
  assert.equal(record.lastReceivedAt, T0 + 50 * 60_000);
  const stats = statsDocument('ds', 0, await store.counters('ds', 0));
  assert.equal(stats.totals.discarded_after_merge_window, 1);
  assert.equal(stats.totals.received, 4);
  assert.equal(stats.totals.events, 2);
  assert.deepEqual(stats.totals.value_by_currency, { USD: 7 });
  await store.close();
});

test('identity linking: shared identifiers join groups; a later event joins two groups; absorbed keys resolve', async () => {
  for (const batchSize of [1, 100]) {
    const { store, queue, consumer } = setup({ batchSize });
    const A = sha('a@x'), B = sha('b@x'), P = sha('+1555'), C = sha('cust-1');
    queue.push({ received_at: T0, data_set_id: 'ds', event: ev('e1', { user_data: { email_address: [A] } }) }); // seq 1: ik_1
    queue.push({ received_at: T0, data_set_id: 'ds', event: ev('e2', { user_data: { phone_numbers: [P] } }) }); // seq 2: ik_2
    queue.push({ received_at: T0, data_set_id: 'ds', event: ev('e3', { user_data: { email_address: [A, B] } }) }); // joins ik_1
    queue.push({ received_at: T0, data_set_id: 'ds', event: ev('e4', { user_data: { customer_identifier: C } }) }); // seq 4: ik_4
    queue.push({ received_at: T0, data_set_id: 'ds', event: ev('e5') }); // no identifiers: no identity
    queue.push({ received_at: T0, data_set_id: 'other', event: { ...ev('x1', { user_data: { email_address: [A] } }), data_set_id: 'other' } }); // other data set
    await consumer.drain();
    const key = async (id: string) => {
      const r = (await store.getRecord('ds', recordKeyForId(id)))!;
      return r.identityKey === null ? null : store.resolveIdentity('ds', r.identityKey);
    };
    assert.equal(await key('e1'), 'ik_1');
    assert.equal(await key('e2'), 'ik_2');
    assert.equal(await key('e3'), 'ik_1');
    assert.equal(await key('e4'), 'ik_4');
    assert.equal(await key('e5'), null);
    assert.equal((await store.getIdentity('ds', 'ik_1'))!.eventCount, 2);

    // e6 shares B (group ik_1) and P (group ik_2): the two groups become one; the older key survives.
    queue.push({ received_at: T0 + 1, data_set_id: 'ds', event: ev('e6', { user_data: { email_address: [B], phone_numbers: [P] } }) });
    // A re-send of e4 that adds the phone: the customer's group joins too, through the merged record.
    queue.push({ received_at: T0 + 2, data_set_id: 'ds', event: ev('e4', { user_data: { phone_numbers: [P] } }) });
    await consumer.drain();
    for (const id of ['e1', 'e2', 'e3', 'e4', 'e6']) assert.equal(await key(id), 'ik_1', id);
    const identity = (await store.getIdentity('ds', 'ik_2'))!;
    assert.equal(identity.identityKey, 'ik_1');
    assert.equal(identity.requestedKey, 'ik_2');
    assert.deepEqual(identity.absorbedKeys, ['ik_2', 'ik_4']);
    assert.equal(identity.eventCount, 5);
    assert.deepEqual(identity.identifiers, [`cid:${C}`, `email:${A}`, `email:${B}`, `phone:${P}`].sort());
    const other = (await store.getIdentity('other', 'ik_6'))!;
    assert.equal(other.eventCount, 1);
    assert.equal(await store.getIdentity('ds', 'ik_999'), null);
    await store.close();
  }
});

test('analytics equal counts computed independently; the view does not depend on batch boundaries', async () => {
  const generated = generateEvents(3000, { seed: 7, idSpace: 0.6, identifierSpace: 0.3 });
  const HOUR = 3_600_000;
  const runs: { file: string; store: SqliteViewStore }[] = [];
  for (const batchSize of [1000, 7, 1]) {
    const { file, store, queue, consumer } = setup({ batchSize });
    generated.forEach((g, i) => queue.push({ received_at: T0 + Math.floor((i / generated.length) * 3 * HOUR), data_set_id: g.dataSetId, event: g.event, ...(g.meta ? { meta: g.meta } : {}) }));
    await consumer.drain();
    runs.push({ file, store });
  }
  const reference = dumpView(runs[0]!.file);
  for (const run of runs.slice(1)) assert.deepEqual(dumpView(run.file), reference);

  // Independent computation: last defined value of each field per (data set, key), identifier kinds ever seen.
  type Acc = { first: number; type: string; source?: string; value?: number; currency?: string; email: boolean; phone: boolean; address: boolean; cid: boolean; ip: boolean; ua: boolean; click: boolean; mmt: boolean };
  const acc = new Map<string, Acc>();
  const received = new Map<string, number>();
  const mergedCount = new Map<string, number>();
  generated.forEach((g, i) => {
    const at = T0 + Math.floor((i / generated.length) * 3 * HOUR);
    const e = g.event as any;
    const ud = e.user_data ?? {};
    const key = `${g.dataSetId}|${e.id ?? `seq${i}`}`;
    const hk = `${g.dataSetId}|${hourOf(at)}`;
    received.set(hk, (received.get(hk) ?? 0) + 1);
    let a = acc.get(key);
    if (a) mergedCount.set(hk, (mergedCount.get(hk) ?? 0) + 1);
    a ??= { first: at, type: e.event_type, email: false, phone: false, address: false, cid: false, ip: false, ua: false, click: false, mmt: false };
    a.type = e.event_type;
    if (e.source !== undefined) a.source = e.source;
    if (e.value !== undefined) { a.value = e.value; a.currency = e.currency_code; }
    a.email ||= !!ud.email_address; a.phone ||= !!ud.phone_numbers; a.address ||= !!ud.address; a.cid ||= !!ud.customer_identifier;
    a.ip ||= !!ud.event_ip_address; a.ua ||= !!ud.event_user_agent; a.click ||= !!ud.click_id;
    a.mmt ||= ud.mmt_only === true || g.meta?.consent?.decision === 'measurement_only';
    acc.set(key, a);
  });
  for (const ds of ['ds-a', 'ds-b']) {
    const doc = statsDocument(ds, 0, await runs[0]!.store.counters(ds, 0));
    const mine = [...acc.entries()].filter(([k]) => k.startsWith(`${ds}|`)).map(([, a]) => a);
    assert.equal(doc.totals.events, mine.length);
    for (const hour of doc.hours) {
      const h = Date.parse(hour.hour);
      const inHour = mine.filter((a) => hourOf(a.first) === h);
      assert.equal(hour.events, inHour.length);
      assert.equal(hour.received, received.get(`${ds}|${h}`) ?? 0);
      assert.equal(hour.merged_duplicates, mergedCount.get(`${ds}|${h}`) ?? 0);
      const byType: Record<string, number> = {};
      const bySource: Record<string, number> = {};
      const value: Record<string, number> = {};
      for (const a of inHour) {
        byType[a.type] = (byType[a.type] ?? 0) + 1;
        bySource[a.source ?? '(none)'] = (bySource[a.source ?? '(none)'] ?? 0) + 1;
        if (a.value !== undefined && toMicros(a.value) !== 0) value[a.currency!] = (value[a.currency!] ?? 0) + toMicros(a.value);
      }
      assert.deepEqual(hour.by_event_type, Object.fromEntries(Object.entries(byType).sort()));
      assert.deepEqual(hour.by_source, Object.fromEntries(Object.entries(bySource).sort()));
      assert.deepEqual(hour.value_by_currency, Object.fromEntries(Object.entries(value).sort().map(([c, m]) => [c, m / 1e6])));
      const share = (f: (a: Acc) => boolean, list = inHour) => Math.round((list.filter(f).length / list.length) * 10_000) / 10_000;
      assert.deepEqual(hour.identifier_coverage, {
        email: share((a) => a.email), phone: share((a) => a.phone), address: share((a) => a.address), customer_id: share((a) => a.cid),
        ip_user_agent: share((a) => a.ip && a.ua), click_id: share((a) => a.click),
      });
      assert.equal(hour.measurement_only_share, share((a) => a.mmt));
      for (const [type, q] of Object.entries(hour.match_quality)) {
        const ofType = inHour.filter((a) => a.type === type);
        const n = (f: (a: Acc) => boolean) => ofType.filter(f).length;
        // 10 x (0.3 email + 0.2 phone + 0.15 customer id + 0.15 click id + 0.1 address + 0.1 IP+UA), from the
        // counts (never from rounded shares), rounded once to one decimal (in integers: tenths).
        const total = 30 * n((a) => a.email) + 20 * n((a) => a.phone) + 15 * n((a) => a.cid) + 15 * n((a) => a.click) + 10 * n((a) => a.address) + 10 * n((a) => a.ip && a.ua);
        const expected = Math.round(total / ofType.length) / 10;
        assert.equal(q.events, ofType.length);
        assert.equal(q.score, expected, `${ds} ${hour.hour} ${type}`);
      }
    }
  }
  for (const run of runs) await run.store.close();
});

test('a counter brought back to zero from below (negative values) disappears, whatever the batches', async () => {
  const dumps = [];
  for (const batchSize of [1, 2]) {
    const { file, store, queue, consumer } = setup({ batchSize });
    queue.push({ received_at: T0, data_set_id: 'ds', event: ev('refund', { value: -5, currency_code: 'USD' }) });
    queue.push({ received_at: T0 + 1000, data_set_id: 'ds', event: ev('sale', { value: 5, currency_code: 'USD' }) });
    await consumer.drain();
    const counters = await store.counters('ds', 0);
    assert.ok(!counters.some((c) => c.n === 0), 'no counter row at zero');
    assert.ok(!counters.some((c) => c.name === 'value:USD'));
    dumps.push(dumpView(file));
    await store.close();
  }
  assert.deepEqual(dumps[0], dumps[1]);
});
