/**
 * Deletions in the console's memory (live/console-deletions.ts, live-store.ts erase): the test
 * environment's list and, in both environments, the recent rejections, against a LiveStore and an
 * in-memory lifecycle store with real keyed digests:
 * which entries each kind of request takes (names, equivalent spellings, what the worker deleted,
 * the conservative rule for what the display masked), whether the target is still in clear or
 * already cleared, and that nothing covered comes back from a late report, also once the erasure
 * is forgotten (the horizon). The black-box run against a real server: test/lifecycle/console-deletions.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { ERASURE_MEMORY_MS, LiveStore, MAX_ERASURES, type ConsoleErasure } from '../../src/live/live-store.js';
import { ConsoleDeletions } from '../../src/live/console-deletions.js';
import { displayedEventId } from '../../src/live/event-display.js';
import { eventForDisplay, eventIdForDisplay, rejectedEventForDisplay } from '../../src/live/event-display.js';
import { targetDigest } from '../../src/lifecycle/identifier-digest.js';
import type { DeletionKind, DeletionRequest, LifecycleBackend, LifecycleStore } from '../../src/lifecycle/lifecycle-backend.js';
import { emptyDataSet, type LiveDelta, type RejectionEntry, type TestEventEntry } from '../../src/live/live-delta.js';

const sha = (text: string) => createHash('sha256').update(text).digest('hex');

const delta = (entries: TestEventEntry[], at = Date.now()): LiveDelta => ({
  at, pid: 1, requests: {}, latency: null, append: null, accepted: 0, rejected: {}, rate_limited: {}, data_sets: {}, rejections: [], test_events: entries,
});

let requestIds = 0;
/** An entry as the recorder builds it (live-recorder.ts): the event masked for display. */
function accepted(dataSetId: string, event: Record<string, unknown>, at = Date.now()): TestEventEntry {
  return { at, data_set_id: dataSetId, key_id: 'key_1', request_id: `r${++requestIds}`, index: 0, event_id: eventIdForDisplay(event), event_type: 'purchase', outcome: 'accepted', ...eventForDisplay(event) };
}
function rejected(dataSetId: string, event: Record<string, unknown>, at = Date.now()): TestEventEntry {
  return { at, data_set_id: dataSetId, key_id: 'key_1', request_id: `r${++requestIds}`, index: 0, event_id: eventIdForDisplay(event), event_type: null, outcome: 'rejected', error: 'x', ...rejectedEventForDisplay(event) };
}
function failed(dataSetId: string, events: Record<string, unknown>[], at = Date.now()): TestEventEntry {
  return {
    at, request_id: `r${++requestIds}`, outcome: 'failed', authenticated: true, status: 429, error: 'rate limited', error_code: null, key_id: 'key_1', data_set_id: dataSetId,
    method: 'POST', path: '/v1/events', headers: {}, body: { events: events.map((e) => rejectedEventForDisplay(e).event) }, index: null, event_id: null, event_type: null,
  };
}

/** The lifecycle store as the feed reads it: requests, the key's digests, the ids a request deleted. */
class MemoryStore {
  readonly key = randomBytes(32);
  readonly requests: (DeletionRequest & { deletedIds: string[] })[] = [];
  record(dataSetId: string, kind: DeletionKind, target: string, requestedAt = Date.now()) {
    const r = { id: this.requests.length + 1, dataSetId, kind, target, targetDigest: targetDigest(this.key, dataSetId, kind, target), suppress: false, boundSeq: 0, actor: 't', requestedAt, state: 'pending' as 'pending' | 'done', doneAt: null as number | null, result: null, deletedIds: [] as string[] };
    this.requests.push(r);
    return r;
  }
  done(id: number, deletedIds: string[] = [], doneAt = Date.now()) {
    const r = this.requests[id - 1]!;
    Object.assign(r, { state: 'done', doneAt, target: null, deletedIds });
  }
  asStore(): Partial<LifecycleStore> {
    const plain = ({ deletedIds: _ids, ...r }: DeletionRequest & { deletedIds: string[] }): DeletionRequest => ({ ...r });
    return {
      audit: async () => [...this.requests].reverse().slice(0, 1).map(plain),
      after: async (afterId, limit) => this.requests.filter((r) => r.id > afterId).slice(0, limit).map(plain),
      pending: async () => this.requests.filter((r) => r.state === 'pending').map(plain),
      get: async (id) => (this.requests[id - 1] ? plain(this.requests[id - 1]!) : null),
      targetDigester: async () => (dataSetId, kind, value) => targetDigest(this.key, dataSetId, kind, value),
      deletedBy: async (dataSetId, eventId) => {
        const r = this.requests.find((q) => q.dataSetId === dataSetId && q.state === 'done' && q.deletedIds.includes(eventId));
        return r ? plain(r) : null;
      },
    };
  }
}

function setUp(env = 'test') {
  const live = new LiveStore({ env });
  const memory = new MemoryStore();
  const deletions = new ConsoleDeletions(live, { store: memory.asStore() } as unknown as LifecycleBackend);
  const ids = () => live.testEvents().map((e) => (e.outcome === 'failed' ? `failed:${(e.body as { events: { id?: string }[] }).events.map((x) => x.id).join(',')}` : e.event_id));
  return { live, memory, deletions, ids };
}

test('events delete: the entries of that id go (accepted, rejected, in a refused body), of that data set only; an entry whose id is masked goes too', async () => {
  const { live, memory, deletions, ids } = setUp();
  await deletions.sync(); // requests before the start are not the list's
  const at = Date.now() - 5_000;
  live.add(delta([
    accepted('shop', { id: 'e-1', value: 1 }, at),
    rejected('shop', { id: 'e-1', event_type: 'nope' }, at),
    failed('shop', [{ id: 'e-1' }, { id: 'e-2' }], at),
    accepted('shop', { id: 'e-2' }, at),
    accepted('other', { id: 'e-1' }, at),
    accepted('shop', { id: 'mary@example.com' }, at), // masked: it cannot be told apart from e-1
  ]));
  assert.equal(live.testEvents().length, 6);
  memory.record('shop', 'delete_event', 'e-1');
  await deletions.sync();
  assert.deepEqual(ids().sort(), ['e-1', 'e-2'], 'the other data set\'s e-1 and shop\'s e-2 stay');
  assert.equal(live.testEvents().find((e) => e.event_id === 'e-1')!.data_set_id, 'other');
});

test('forget --identifier: every entry carrying the identifier in any hashed field or spelling goes, rejected ones too; masked identifiers go; others stay', async () => {
  const { live, memory, deletions, ids } = setUp();
  await deletions.sync();
  const A = sha('a@example.com');
  const B = sha('b@example.com');
  const at = Date.now() - 5_000;
  live.add(delta([
    accepted('shop', { id: 'email', user_data: { email_address: [A] } }, at),
    accepted('shop', { id: 'uid', user_data: { uids: [{ source: 'x.com', id: A }] } }, at),
    rejected('shop', { id: 'rejected', event_type: 'nope', user_data: { customer_identifier: A } }, at),
    accepted('shop', { id: 'ifa', user_data: { email_address: [B], ifa: '6F9619FF-8B86-D011-B42D-00CF4FC964FF' } }, at),
    accepted('shop', { id: 'kept', user_data: { email_address: [B], event_user_agent: 'Mozilla/5.0', event_ip_address: '203.0.113.9' } }, at),
    accepted('shop', { id: 'none' }, at),
    rejected('shop', { id: 'misnamed', event_type: 'nope', email: 'a@example.com' }, at),
  ]));
  // Cleared before the list saw it pending: the digests still tell.
  const r = memory.record('shop', 'forget_identifier', `phone:${A}`);
  memory.done(r.id);
  await deletions.sync();
  assert.deepEqual(ids().sort(), ['kept', 'none'], 'the masked ifa and the unknown member cannot be compared: they go; a masked user agent is no identifier');
});

test('forget: once done, the entries of the records the worker deleted go (an identity key names nothing before), and entries without an id', async () => {
  const { live, memory, deletions, ids } = setUp();
  await deletions.sync();
  const at = Date.now() - 5_000;
  live.add(delta([
    accepted('shop', { id: 'linked', user_data: { phone_numbers: [sha('+1555')] } }, at),
    accepted('shop', { user_data: { phone_numbers: [sha('+1555')] } }, at),
    accepted('shop', { id: 'kept' }, at),
  ]));
  const r = memory.record('shop', 'forget_identity', 'ik_7');
  await deletions.sync();
  assert.equal(live.testEvents().length, 3, 'pending: an identity key names nothing the list shows');
  memory.done(r.id, ['linked']);
  await deletions.sync();
  assert.deepEqual(ids(), ['kept']);
  // A late report of an entry received before the request was done: looked up at the next read.
  live.add(delta([accepted('shop', { id: 'linked', value: 2 }, at + 1), accepted('shop', { id: 'late-kept' }, at + 1)]));
  await deletions.sync();
  assert.deepEqual(ids().sort(), ['kept', 'late-kept']);
});

test('entries received after the request stay; entries received before it that a serving process reports later are dropped', async () => {
  const { live, memory, deletions, ids } = setUp();
  await deletions.sync();
  const before = Date.now() - 2_000;
  live.add(delta([accepted('shop', { id: 'e-1' }, before)]));
  memory.record('shop', 'delete_event', 'e-1', Date.now() - 1_000);
  await deletions.sync();
  assert.deepEqual(ids(), []);
  live.add(delta([accepted('shop', { id: 'e-1', value: 3 }, before + 1)]));
  assert.deepEqual(ids(), [], 'reported late: dropped on arrival');
  live.add(delta([accepted('shop', { id: 'e-1', value: 4 }, Date.now() + 10)]));
  assert.deepEqual(ids(), ['e-1'], 'sent after the request: a new event');
});

test('LiveStore: an erasure is remembered ERASURE_MEMORY_MS, then its horizon drops what arrives from before it; at most MAX_ERASURES are kept', () => {
  const live = new LiveStore({ env: 'test' });
  const now = Date.now();
  const erasure: ConsoleErasure = { dataSetId: 'shop', throughMs: now - 1_000, covers: (e) => e.event_id === 'x' };
  assert.equal(live.erase([erasure], now), 0);
  live.add(delta([accepted('shop', { id: 'x' }, now - 2_000), accepted('shop', { id: 'y' }, now - 2_000), accepted('other', { id: 'x' }, now - 2_000)]));
  assert.deepEqual(live.testEvents().map((e) => `${e.data_set_id}/${e.event_id}`).sort(), ['other/x', 'shop/y']);
  // Forgotten: a later erasure's pass moves the horizon; an entry from before it is dropped, covered or not.
  live.erase([{ dataSetId: 'elsewhere', throughMs: now, covers: () => false }], now + ERASURE_MEMORY_MS + 1);
  live.add(delta([accepted('shop', { id: 'z' }, now - 1_500), accepted('shop', { id: 'w' }, now - 500)], now));
  assert.deepEqual(live.testEvents().map((e) => e.event_id).sort(), ['w', 'x', 'y'], 'z (before the horizon) dropped; w (after it) kept');
  // The bound.
  const many = Array.from({ length: MAX_ERASURES + 10 }, (_, i): ConsoleErasure => ({ dataSetId: `d${i}`, throughMs: now, covers: () => true }));
  live.erase(many, now);
  live.add(delta([accepted('d0', { id: 'late' }, now - 1)]));
  assert.ok(!live.testEvents().some((e) => e.data_set_id === 'd0'), 'the oldest, forgotten early, still drops what came before it');
});

/** A serving process's report of rejections (live-recorder.ts: the id as displayedEventId shows it), its data sets counted. */
function rejections(entries: { dataSetId: string; id: string | null; at: number }[]): LiveDelta {
  const list: RejectionEntry[] = entries.map(({ dataSetId, id, at }, index) => ({ at, data_set_id: dataSetId, request_id: `r${++requestIds}`, index, event_id: displayedEventId(id), error: 'schema validation failed' }));
  const data_sets = Object.fromEntries(entries.map((e) => [e.dataSetId, { ...emptyDataSet(), rejected: 1 }]));
  return { ...delta([], Math.max(...entries.map((e) => e.at))), data_sets, rejections: list };
}

const recent = (live: LiveStore, dataSetId: string) => live.dataSet(dataSetId).recent_rejections.map((r) => r.event_id);

for (const env of ['production', 'test']) {
  test(`recent rejections (${env}): events delete takes that id's rejections, and masked ids, of its data set; a late report is dropped; a later rejection stays`, async () => {
    const { live, memory, deletions } = setUp(env);
    await deletions.sync();
    const at = Date.now() - 5_000;
    live.add(rejections([
      { dataSetId: 'shop', id: 'e-1', at },
      { dataSetId: 'shop', id: 'e-2', at },
      { dataSetId: 'shop', id: null, at },
      { dataSetId: 'shop', id: 'mary@example.com', at },
      { dataSetId: 'other', id: 'e-1', at },
    ]));
    assert.equal(recent(live, 'shop').length, 4);
    assert.ok(recent(live, 'shop').some((id) => id !== null && id !== 'e-1' && id !== 'e-2'), 'the email-like id is shown masked');
    memory.record('shop', 'delete_event', 'e-1', Date.now() - 1_000);
    await deletions.sync();
    assert.deepEqual(recent(live, 'shop').sort(), ['e-2', null].sort(), 'e-1 and the masked id go; e-2 and the rejection without an id stay');
    assert.deepEqual(recent(live, 'other'), ['e-1'], 'the other data set keeps its own e-1');
    live.add(rejections([{ dataSetId: 'shop', id: 'e-1', at: at + 1 }]));
    assert.ok(!recent(live, 'shop').includes('e-1'), 'reported late: dropped on arrival');
    live.add(rejections([{ dataSetId: 'shop', id: 'e-1', at: Date.now() + 10 }]));
    assert.ok(recent(live, 'shop').includes('e-1'), 'rejected after the request: a new rejection');
  });
}

test('recent rejections: a forget takes masked ids at once and, once done, the ids of the records it deleted; other rejections stay', async () => {
  const { live, memory, deletions } = setUp('production');
  await deletions.sync();
  const at = Date.now() - 5_000;
  live.add(rejections([
    { dataSetId: 'shop', id: 'linked', at },
    { dataSetId: 'shop', id: '+15551234567', at },
    { dataSetId: 'shop', id: 'kept', at },
    { dataSetId: 'shop', id: null, at },
  ]));
  const r = memory.record('shop', 'forget_identifier', `email:${sha('a@example.com')}`);
  await deletions.sync();
  assert.deepEqual(recent(live, 'shop').sort(), ['kept', 'linked', null].sort(), 'pending: only the masked id (it may name the person) goes');
  memory.done(r.id, ['linked']);
  await deletions.sync();
  assert.deepEqual(recent(live, 'shop').sort(), ['kept', null].sort(), 'done: the id of a record it deleted goes; a rejection without an id holds nothing of anyone');
});

test('production keeps no test events, whatever an erasure covers', () => {
  const live = new LiveStore({ env: 'production' });
  live.add(delta([accepted('shop', { id: 'x' })]));
  assert.deepEqual(live.testEvents(), []);
  assert.equal(live.erase([{ dataSetId: 'shop', throughMs: Date.now(), covers: () => true }]), 0);
});
