/**
 * track(): background batching by count, bytes and time, flush(), close() (closeAndFlush), the
 * bounded queue's drop-newest policy, local rejections, against a scripted loopback HTTPS server.
 * No timing assertions: each test waits for an outcome (a request arriving, a promise settling).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ClientClosedError, type DroppedEvent, type SendResult } from '../src/index.js';
import { scripted, type Seen } from './helpers/https-test-server.js';

const ev = (id: string, extra: Record<string, unknown> = {}) => ({ id, timestamp: 1746558464, event_type: 'page_view' as const, ...extra });

/** Resolves when `check()` holds (polled); a test that never gets there fails instead of hanging. */
async function until(check: () => boolean, what = 'the expected outcome'): Promise<void> {
  for (let i = 0; !check(); i++) {
    if (i > 3000) throw new Error(`never reached: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const accepted = (seen: Seen) => ({ status: 200, body: { accepted: seen.events.length } });

test('a batch leaves when flushAt events wait, without flush(); the rest on flush()', async () => {
  const s = await scripted(accepted);
  const batches: SendResult[] = [];
  const c = s.client({ flushAt: 3, flushIntervalMs: 3_600_000, onBatch: (r) => batches.push(r) });
  try {
    for (const id of ['a', 'b', 'c', 'd']) assert.deepEqual(c.track(ev(id)), { status: 'queued', id });
    await until(() => batches.length === 1);
    assert.deepEqual(s.seen.map((x) => x.events.map((e) => e.id)), [['a', 'b', 'c']]);
    assert.deepEqual(batches[0]!.results.map((r) => [r.status, r.id]), [['accepted', 'a'], ['accepted', 'b'], ['accepted', 'c']]);
    const stats = await c.flush();
    assert.deepEqual(s.seen.map((x) => x.events.map((e) => e.id)), [['a', 'b', 'c'], ['d']]);
    assert.deepEqual(stats, { tracked: 4, queued: 0, queuedBytes: 0, accepted: 4, rejected: 0, undeliverable: 0, dropped: 0, batches: 2 });
  } finally {
    await c.close();
    await s.close();
  }
});

test('a batch leaves when flushBytes are reached', async () => {
  const s = await scripted(accepted);
  const c = s.client({ flushAt: 1000, flushBytes: 2000, flushIntervalMs: 3_600_000 });
  try {
    c.track(ev('x1', { properties: { pad: 'p'.repeat(800) } }));
    assert.equal(s.seen.length, 0);
    c.track(ev('x2', { properties: { pad: 'p'.repeat(800) } }));
    c.track(ev('x3', { properties: { pad: 'p'.repeat(800) } }));
    await until(() => s.seen.length === 1);
    assert.deepEqual(s.seen[0]!.events.map((e) => e.id), ['x1', 'x2']);
    assert.ok(s.seen[0]!.body.length <= 2000 + 20);
  } finally {
    await c.close();
    await s.close();
  }
  assert.deepEqual(s.seen.map((x) => x.events.map((e) => e.id)), [['x1', 'x2'], ['x3']], 'close() sent the last one');
});

test('a batch leaves after flushIntervalMs without flush() or a full batch', async () => {
  const s = await scripted(accepted);
  const c = s.client({ flushAt: 1000, flushIntervalMs: 20 });
  try {
    c.track(ev('t1'));
    c.track(ev('t2'));
    await until(() => s.seen.length === 1);
    assert.deepEqual(s.seen[0]!.events.map((e) => e.id), ['t1', 't2']);
    await until(() => c.stats().accepted === 2);
    assert.equal(c.stats().queued, 0);
  } finally {
    await c.close();
    await s.close();
  }
});

test('bounded queue: the newest events are dropped (onDrop, counter, result) while a batch is stuck; nothing held is lost', async () => {
  let release!: () => void;
  const stuck = new Promise<void>((resolve) => (release = resolve));
  const s = await scripted(async (seen, n) => {
    if (n === 0) await stuck;
    return accepted(seen);
  });
  const drops: DroppedEvent[] = [];
  const c = s.client({ flushAt: 2, maxQueuedEvents: 4, flushIntervalMs: 3_600_000, onDrop: (d) => drops.push(d) });
  try {
    c.track(ev('q1'));
    c.track(ev('q2')); // full batch: leaves, and is stuck at the server
    await until(() => s.seen.length === 1);
    c.track(ev('q3'));
    c.track(ev('q4')); // 4 held: 2 in flight, 2 waiting (a full batch, which waits for the one in flight)
    const r5 = c.track(ev('q5'));
    assert.equal(r5.status, 'dropped');
    assert.match((r5 as { message: string }).message, /^queue full: 4 events, \d+ bytes held \(maxQueuedEvents 4, maxQueuedBytes 16777216\); the newest event is dropped$/);
    assert.deepEqual(drops.map((d) => [d.reason, d.id, d.event.id, d.event.data_set_id]), [['queue-full', 'q5', 'q5', 'ds']]);
    assert.equal(c.stats().dropped, 1);
    assert.equal(c.stats().queued, 4);
    release();
    const stats = await c.flush();
    assert.deepEqual([stats.accepted, stats.dropped, stats.queued], [4, 1, 0]);
    assert.deepEqual(s.seen.map((x) => x.events.map((e) => e.id)), [['q1', 'q2'], ['q3', 'q4']]);
    assert.equal(c.track(ev('q6')).status, 'queued', 'room again once the batches settled');
  } finally {
    release();
    await c.close();
    await s.close();
  }
});

test('maxQueuedBytes bounds the bytes held', async () => {
  const s = await scripted(accepted);
  const c = s.client({ maxQueuedBytes: 3000, flushIntervalMs: 3_600_000 });
  try {
    assert.equal(c.track(ev('b1', { properties: { pad: 'p'.repeat(1200) } })).status, 'queued');
    assert.equal(c.track(ev('b2', { properties: { pad: 'p'.repeat(1200) } })).status, 'queued');
    assert.equal(c.track(ev('b3', { properties: { pad: 'p'.repeat(1200) } })).status, 'dropped');
    assert.equal(c.track(ev('b4')).status, 'queued', 'a small one still fits');
    assert.ok(c.stats().queuedBytes <= 3000);
  } finally {
    await c.close();
    await s.close();
  }
  assert.deepEqual(s.seen.flatMap((x) => x.events.map((e) => e.id)), ['b1', 'b2', 'b4']);
});

test('a locally invalid event is rejected at track() with the service\'s message, never queued', async () => {
  const s = await scripted(accepted);
  const c = s.client();
  try {
    const r = c.track({ id: 'bad', timestamp: 1746558464, event_type: 'purchse' } as never);
    assert.deepEqual(r, { status: 'rejected', id: 'bad', error: { code: 'SCHEMA', message: 'schema validation failed: event_type must be one of the ECAPI 1.0 event types, got "purchse"' } });
    assert.equal(c.stats().rejected, 1);
    assert.equal(c.stats().queued, 0);
    const t = c.track({ timestamp: 1746558464, event_type: 'page_view' });
    assert.ok(t.status === 'queued' && typeof t.id === 'string' && t.id.length === 36, 'an id is generated at track()');
  } finally {
    await c.close();
    await s.close();
  }
  assert.equal(s.seen.length, 1);
});

test('close() (closeAndFlush) sends what waits, then track() and send() throw', async () => {
  const s = await scripted(accepted);
  const batches: SendResult[] = [];
  const c = s.client({ flushIntervalMs: 3_600_000, onBatch: (r) => batches.push(r) });
  c.track(ev('c1'));
  c.track(ev('c2'));
  await c.closeAndFlush();
  try {
    assert.deepEqual(s.seen.map((x) => x.events.map((e) => e.id)), [['c1', 'c2']]);
    assert.equal(batches.length, 1);
    assert.throws(() => c.track(ev('c3')), (e: Error) => e instanceof ClientClosedError && e.name === 'ClientClosedError' && /Client is closed/.test(e.message));
    await assert.rejects(c.send([ev('c4')]), ClientClosedError);
  } finally {
    await s.close();
  }
});

test('a batch the service rejects or cannot take reaches onBatch with the events to resend', async () => {
  // The spec's multi-status shape, counts included (a body that does not add up accepts nothing: client-consistency.test.ts).
  const s = await scripted((seen) => ({ status: 207, body: { accepted: seen.events.length - 1, rejected: 1, errors: [{ index: 1, event_id: seen.events[1]!.id, error: 'missing required field: currency_code' }] } }));
  const batches: SendResult[] = [];
  const c = s.client({ flushIntervalMs: 3_600_000, onBatch: (r) => batches.push(r) });
  try {
    c.track(ev('r1'));
    c.track(ev('r2'));
    const stats = await c.flush();
    assert.deepEqual([stats.accepted, stats.rejected], [1, 1]);
    const rejected = batches[0]!.results[1]!;
    assert.ok(rejected.status === 'rejected' && rejected.error.code === 'MISSING_FIELD' && rejected.event.id === 'r2');
  } finally {
    await c.close();
    await s.close();
  }
});
