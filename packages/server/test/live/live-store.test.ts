/** LiveStore (live/live-store.ts): series before the store started are null, not 0. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LiveStore } from '../../src/live/live-store.js';
import type { LiveDelta } from '../../src/live/live-delta.js';

const delta = (at: number, accepted: number): LiveDelta => ({
  at, pid: 1, requests: { '200': 1 }, latency: null, append: null, accepted, rejected: {}, rate_limited: {},
  data_sets: { ds: { accepted, rejected: 0, reasons: {}, rate_limited: 0, measurement_only: 0 } }, rejections: [], test_events: [],
});

test('node and data set series are null before the store started, counted from then on', () => {
  const now = Date.now();
  const startedAt = now - 95_000; // 95 s ago
  const store = new LiveStore({ env: 'production', startedAt });
  store.add(delta(now - 5_000, 20));
  const ts = store.timeseries(300_000, 10_000, now);
  const started = Math.floor(startedAt / 1000) * 1000;
  ts.t.forEach((t, i) => {
    const ended = t * 1000 + 10_000 <= started;
    assert.equal(ts.series.events_accepted[i] === null, ended, `step at ${t}: ${ts.series.events_accepted[i]}`);
    assert.equal(ts.series.requests_2xx[i] === null, ended);
  });
  assert.ok(ts.series.events_accepted.filter((v) => v === null).length >= 19, 'about 20 of 30 steps before the start');
  assert.ok((ts.series.events_accepted.at(-1) ?? 0) > 0 || (ts.series.events_accepted.at(-2) ?? 0) > 0, 'the events are counted');

  const ds = store.dataSet('ds', now);
  assert.equal(ds.t.length, 60);
  assert.equal(ds.accepted[0], null);
  assert.equal(ds.accepted.filter((v) => v !== null).length <= 3, true, 'only the minutes since the start have values');
  assert.equal(ds.accepted.at(-1) !== null, true);
  assert.equal(ds.last_hour.accepted, 20);
});
