import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hourOf } from '../../src/model/hourly-counters.js';
import { contributionOf, isMeasurementOnly, toMicros } from '../../src/merged-view/record-counters.js';
import { figuresOf, matchQuality, statsDocument } from '../../src/analytics/stats-document.js';
import { reasonGroupOf } from '../../src/analytics/reason-groups.js';
import { BufferedOutcomeRecorder } from '../../src/analytics/buffered-outcome-recorder.js';
import { ingestRows, parseSince } from '../../src/analytics/stats-reader.js';
import type { DataSetCounterDelta, IngestStatsStore } from '../../src/merged-view/view-store.js';

test('hour buckets are UTC hours', () => {
  assert.equal(hourOf(Date.UTC(2025, 4, 6, 19, 7, 44, 123)), Date.UTC(2025, 4, 6, 19));
  assert.equal(hourOf(Date.UTC(2025, 4, 6, 19)), Date.UTC(2025, 4, 6, 19));
});

test('contribution of one record', () => {
  const c = contributionOf(
    { event_type: 'purchase', source: 'app', value: 19.99, currency_code: 'usd', user_data: { email_address: ['e'], click_id: 'k' } },
    true,
  );
  assert.deepEqual(Object.fromEntries(c), {
    events: 1, 'type:purchase': 1, 'source:app': 1, 'value:USD': 19_990_000, 'cov:purchase:email': 1, 'cov:purchase:click_id': 1, mmt: 1,
  });
  assert.deepEqual(Object.fromEntries(contributionOf({ event_type: 'page_view' }, false)), { events: 1, 'type:page_view': 1, 'source:(none)': 1 });
});

test('measurement-only: consent decision or mmt_only', () => {
  assert.equal(isMeasurementOnly({}, { consent: { decision: 'measurement_only' } }), true);
  assert.equal(isMeasurementOnly({ user_data: { mmt_only: true } }, undefined), true);
  assert.equal(isMeasurementOnly({ user_data: { mmt_only: false } }, { consent: { decision: 'none' } }), false);
});

test('match quality: 10 x weighted coverage, from the counts', () => {
  const none = { email: 0, phone: 0, address: 0, customer_id: 0, ip_user_agent: 0, click_id: 0 };
  assert.equal(matchQuality(none, 4), 0);
  assert.equal(matchQuality(none, 0), 0);
  assert.equal(matchQuality({ email: 4, phone: 4, address: 4, customer_id: 4, ip_user_agent: 4, click_id: 4 }, 4), 10);
  assert.equal(matchQuality({ ...none, email: 2 }, 4), 1.5);
  assert.equal(matchQuality({ ...none, email: 2, phone: 1, click_id: 2 }, 2), 5.5);
  // 10 x 0.15 x 5/6 = 1.25 exactly: one rounding, half up, gives 1.3. From the share rounded to
  // 4 decimals (0.8333) it came out 1.2 (issue 15, item 6).
  assert.equal(matchQuality({ ...none, customer_id: 5 }, 6), 1.3);
  assert.equal(matchQuality({ ...none, click_id: 5 }, 6), 1.3);
  // 10 x 0.1 x 5/6 = 0.8333: 0.8; 10 x 0.3 x 1/6 = 0.5 exactly: 0.5.
  assert.equal(matchQuality({ ...none, address: 5 }, 6), 0.8);
  assert.equal(matchQuality({ ...none, email: 1 }, 6), 0.5);
});

test('stats document: the match-quality score is computed from unrounded coverage, rounded once', () => {
  const h = Date.UTC(2025, 0, 1, 10);
  const rows = [
    { hour: h, name: 'events', n: 6 }, { hour: h, name: 'type:purchase', n: 6 }, { hour: h, name: 'cov:purchase:customer_id', n: 5 },
  ];
  const doc = statsDocument('ds', h, rows);
  assert.equal(doc.totals.identifier_coverage.customer_id, 0.8333);
  assert.equal(doc.totals.match_quality.purchase!.score, 1.3);
  assert.equal(doc.totals.match_quality_score, 1.3);
  assert.equal(doc.hours[0]!.match_quality.purchase!.score, 1.3);
  // All types together: 6 purchases (5 with a customer id) and 4 leads (3 with a click id):
  // 10 x (0.15 x 5/10 + 0.15 x 3/10) = 1.2.
  const two = statsDocument('ds', h, [...rows, { hour: h, name: 'events', n: 4 }, { hour: h, name: 'type:lead', n: 4 }, { hour: h, name: 'cov:lead:click_id', n: 3 }]);
  assert.equal(two.totals.match_quality_score, 1.2);
  assert.equal(two.totals.match_quality.lead!.score, 1.1); // 10 x 0.15 x 3/4 = 1.125
  assert.equal(statsDocument('ds', h, []).totals.match_quality_score, 0);
});

test('rejection reasons are grouped without array indexes', () => {
  assert.equal(
    reasonGroupOf('hashed field user_data.email_address[3] is not a 64-char lowercase hex sha256'),
    'hashed field user_data.email_address[] is not a 64-char lowercase hex sha256',
  );
  assert.equal(reasonGroupOf('missing required field: timestamp'), 'missing required field: timestamp');
  assert.equal(
    reasonGroupOf('invalid field user_data.address[0].country_code: must be x'),
    'invalid field user_data.address[].country_code: must be x',
  );
});

test('stats document: totals, hours, shares, values in currency units', () => {
  const h1 = Date.UTC(2025, 0, 1, 10);
  const h2 = Date.UTC(2025, 0, 1, 11);
  const rows = [
    { hour: h1, name: 'events', n: 2 }, { hour: h1, name: 'type:purchase', n: 2 }, { hour: h1, name: 'value:USD', n: toMicros(1.1) },
    { hour: h1, name: 'cov:purchase:email', n: 1 }, { hour: h1, name: 'mmt', n: 1 }, { hour: h1, name: 'accepted', n: 3 },
    { hour: h2, name: 'events', n: 2 }, { hour: h2, name: 'type:lead', n: 2 }, { hour: h2, name: 'value:USD', n: toMicros(2.2) },
    { hour: h2, name: 'reason:missing required field: timestamp', n: 4 }, { hour: h2, name: 'rejected', n: 4 },
  ];
  const doc = statsDocument('ds', h1 + 5, rows);
  assert.equal(doc.hours.length, 2);
  assert.equal(doc.totals.events, 4);
  assert.deepEqual(doc.totals.value_by_currency, { USD: 3.3 });
  assert.equal(doc.totals.identifier_coverage.email, 0.25);
  assert.equal(doc.totals.measurement_only_share, 0.25);
  assert.deepEqual(doc.totals.ingest, { accepted: 3, rejected: 4, rejections: { 'missing required field: timestamp': 4 } });
  assert.equal(doc.totals.match_quality.purchase!.score, 1.5);
  assert.equal(doc.totals.match_quality.lead!.score, 0);
  assert.equal(statsDocument('ds', h2, rows).totals.events, 2);
  assert.equal(figuresOf(new Map()).measurement_only_share, 0);
});

test('ingest rows: accepted from the queue counts; ingest-stats accepted only for hours the queue has no count of', () => {
  const h1 = Date.UTC(2025, 0, 1, 10);
  const h2 = h1 + 3_600_000;
  const ingest = [
    { hour: h1, name: 'accepted', n: 7 }, { hour: h1, name: 'rejected', n: 2 },
    { hour: h2, name: 'accepted', n: 3 }, { hour: h2, name: 'rejected', n: 1 },
  ];
  const queue = [{ hour: h2, name: 'accepted', n: 5 }];
  const doc = statsDocument('ds', h1, ingestRows(ingest, queue));
  assert.equal(doc.hours[0]!.ingest.accepted, 7);
  assert.equal(doc.hours[1]!.ingest.accepted, 5);
  assert.deepEqual(doc.totals.ingest, { accepted: 12, rejected: 3, rejections: {} });
  assert.equal(statsDocument('ds', h1, ingestRows(ingest, null)).totals.ingest.accepted, 10);
});

test('--since: durations back from now, ISO times, epoch ms', () => {
  const now = Date.UTC(2025, 0, 2);
  assert.equal(parseSince('24h', now), Date.UTC(2025, 0, 1));
  assert.equal(parseSince('2025-01-01T00:00:00Z', now), Date.UTC(2025, 0, 1));
  assert.equal(parseSince(String(Date.UTC(2024, 0, 1)), now), Date.UTC(2024, 0, 1));
  assert.throws(() => parseSince('yesterday', now), /invalid time/);
});

test('outcome recorder aggregates in memory and flushes; a failed flush keeps the counts and is said once per change', async () => {
  const written: DataSetCounterDelta[] = [];
  let fail = true;
  const store: IngestStatsStore = {
    async add(deltas) {
      if (fail) throw new Error('busy');
      written.push(...deltas);
    },
    async counters() {
      return [];
    },
    async close() {},
  };
  const errors: Error[] = [];
  let recovered = 0;
  const recorder = new BufferedOutcomeRecorder(store, { flushMs: 60_000, onError: (e) => errors.push(e), onRecovered: () => recovered++ });
  const t = Date.UTC(2025, 0, 1, 10, 30);
  recorder.record('ds', t, 5, []);
  recorder.record('ds', t, 1, ['hashed field user_data.email_address[0] is not a 64-char lowercase hex sha256', 'hashed field user_data.email_address[7] is not a 64-char lowercase hex sha256']);
  recorder.record('ds', t + 3_600_000, 0, ['missing required field: timestamp']);
  await recorder.flush();
  assert.equal(errors.length, 1);
  assert.equal(written.length, 0);
  await recorder.flush();
  assert.equal(errors.length, 1, 'a failure is said once per change, not at every flush');
  fail = false;
  await recorder.flush();
  assert.equal(recovered, 1, 'the first flush that succeeds says the recovery');
  assert.equal(written.length, 4);
  await recorder.close();
  const byKey = Object.fromEntries(written.map((d) => [`${d.hour}|${d.name}`, d.n]));
  const h = Date.UTC(2025, 0, 1, 10);
  // Accepted events are counted by the queue commit (exactly), not here.
  assert.deepEqual(byKey, {
    [`${h}|rejected`]: 2,
    [`${h}|reason:hashed field user_data.email_address[] is not a 64-char lowercase hex sha256`]: 2,
    [`${h + 3_600_000}|rejected`]: 1,
    [`${h + 3_600_000}|reason:missing required field: timestamp`]: 1,
  });
});
