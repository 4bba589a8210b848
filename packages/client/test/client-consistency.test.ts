/**
 * A 200, 207 (or multi-status 400) body is checked against the request it answers before any event
 * is reported accepted on its word (src/multi-status.ts), against a scripted loopback HTTPS server
 * that answers crafted bodies to requests whose HMAC verifies: one that adds up (an event_id of null
 * included) is believed; one that does not (a wrong count, an index out of range or listed twice,
 * an event_id not the one sent, no errors list; a 200 without `accepted` equal to the events sent,
 * an empty or HTML body) accepts nothing: the events it still clearly rejects stay rejected, every
 * other one is undeliverable with INCONSISTENT_RESPONSE, not retried, and the send goes on.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sign, type EventResult, type SendResult, type TrackStats, type UndeliverableEvent } from '../src/index.js';
import { scripted, type Reply, type Seen } from './helpers/https-test-server.js';

const ev = (id: string) => ({ id, timestamp: 1746558464, event_type: 'page_view' as const });
const MISSING = 'missing required field: currency_code';
const SAFE = 'whether this event was stored is unknown: resend it (its id is kept; resending is safe, events merge by id)';

/** `reply` to a request signed with the scripted client's secret (sk_1); a 401 to any other. */
const signed = (reply: Reply) => (seen: Seen): Reply =>
  seen.headers['x-service-signature'] === sign(seen.body, 'sk_1') ? reply : { status: 401, body: { error: 'signature does not match' } };

/** Sends events a, b, c in one request answered with `reply`; returns the result and what was seen. */
async function sendAbc(reply: Reply, ids: string[] = ['a', 'b', 'c']): Promise<SendResult> {
  const s = await scripted(signed({ ...reply, headers: { 'x-request-id': 'req_1', ...reply.headers } }));
  const c = s.client();
  try {
    const r = await c.send(ids.map(ev));
    assert.equal(s.seen.length, 1, 'one request, not retried');
    assert.equal(r.failure, undefined, 'not a request-level failure');
    return r;
  } finally {
    await c.close();
    await s.close();
  }
}

const statuses = (r: SendResult) => r.results.map((x) => x.status);
const counts = (r: SendResult) => [r.accepted, r.rejected, r.undeliverable, r.total];
/** Every undeliverable result is INCONSISTENT_RESPONSE with this message, of `status`, with the response's request id. */
function assertInconsistent(r: SendResult, status: number, problem: string): void {
  const undeliverable = r.results.filter((x): x is UndeliverableEvent => x.status === 'undeliverable');
  assert.ok(undeliverable.length > 0);
  for (const x of undeliverable) {
    assert.deepEqual(
      { code: x.error.code, message: x.error.message, httpStatus: x.error.httpStatus, requestId: x.error.requestId, attempts: x.attempts, eventId: x.event.id },
      { code: 'INCONSISTENT_RESPONSE', message: `inconsistent ${status} response: ${problem}; ${SAFE}`, httpStatus: status, requestId: 'req_1', attempts: 1, eventId: x.id },
    );
  }
}
const rejectedCode = (x: EventResult | undefined) => (x?.status === 'rejected' ? [x.error.code, x.httpStatus] : x?.status);

test('a 207 that adds up is believed: listed events rejected (event_id null is no mismatch), the others accepted', async () => {
  const r = await sendAbc({
    status: 207,
    body: { accepted: 1, rejected: 2, errors: [{ index: 0, event_id: null, error: MISSING }, { index: 2, event_id: 'c', error: 'invalid field currency_code: ISO 4217 codes are uppercase: send "USD"' }] },
  });
  assert.deepEqual(statuses(r), ['rejected', 'accepted', 'rejected'], JSON.stringify(r.results));
  assert.deepEqual(counts(r), [1, 2, 0, 3]);
  assert.deepEqual([rejectedCode(r.results[0]), rejectedCode(r.results[2])], [['MISSING_FIELD', 207], ['INVALID_FIELD', 207]]);
  assert.equal((r.results[1] as { requestId?: string }).requestId, 'req_1');
});

test('a 207 whose counts do not add up accepts nothing: the clearly listed rejection stays, the rest are INCONSISTENT_RESPONSE', async () => {
  const r = await sendAbc({ status: 207, body: { accepted: 3, rejected: 1, errors: [{ index: 1, event_id: 'b', error: MISSING }] } });
  assert.deepEqual(statuses(r), ['undeliverable', 'rejected', 'undeliverable'], JSON.stringify(r.results));
  assert.deepEqual(counts(r), [0, 1, 2, 3]);
  assert.deepEqual(rejectedCode(r.results[1]), ['MISSING_FIELD', 207]);
  assertInconsistent(r, 207, 'accepted 3 + rejected 1 is not the 3 events sent');
});

test('a 207 whose errors list is shorter than its rejected count accepts nothing', async () => {
  const r = await sendAbc({ status: 207, body: { accepted: 1, rejected: 2, errors: [{ index: 0, event_id: 'a', error: MISSING }] } });
  assert.deepEqual(statuses(r), ['rejected', 'undeliverable', 'undeliverable'], JSON.stringify(r.results));
  assertInconsistent(r, 207, 'rejected is 2 but errors lists 1');
});

test('a 207 without the counts (not the spec\'s shape) accepts nothing', async () => {
  const r = await sendAbc({ status: 207, body: { errors: [{ index: 0, event_id: 'a', error: MISSING }] } });
  assert.deepEqual(statuses(r), ['rejected', 'undeliverable', 'undeliverable'], JSON.stringify(r.results));
  assertInconsistent(r, 207, 'accepted is missing or not a whole number; rejected is missing or not a whole number');
});

test('a 207 with an index out of range, or not a whole number, accepts nothing and rejects nothing on that entry', async () => {
  const r = await sendAbc({ status: 207, body: { accepted: 2, rejected: 1, errors: [{ index: 3, event_id: null, error: MISSING }] } });
  assert.deepEqual(statuses(r), ['undeliverable', 'undeliverable', 'undeliverable'], JSON.stringify(r.results));
  assert.deepEqual(counts(r), [0, 0, 3, 3]);
  assertInconsistent(r, 207, 'errors[0].index is not a whole number from 0 to 2');
  for (const index of [1.5, '1', -1, null]) {
    const x = await sendAbc({ status: 207, body: { accepted: 2, rejected: 1, errors: [{ index, event_id: null, error: MISSING }] } });
    assert.deepEqual(statuses(x), ['undeliverable', 'undeliverable', 'undeliverable'], String(index));
    assertInconsistent(x, 207, 'errors[0].index is not a whole number from 0 to 2');
  }
});

test('a 207 listing an index twice accepts nothing; that index is not taken as rejected', async () => {
  const r = await sendAbc({
    status: 207,
    body: { accepted: 1, rejected: 2, errors: [{ index: 1, event_id: 'b', error: MISSING }, { index: 1, event_id: 'b', error: MISSING }] },
  });
  assert.deepEqual(statuses(r), ['undeliverable', 'undeliverable', 'undeliverable'], JSON.stringify(r.results));
  assertInconsistent(r, 207, 'index 1 is listed twice (errors[0] and errors[1])');
});

test('a 207 naming another event_id at an index accepts nothing; the message does not repeat the id', async () => {
  const r = await sendAbc({
    status: 207,
    body: { accepted: 1, rejected: 2, errors: [{ index: 0, event_id: 'a', error: MISSING }, { index: 1, event_id: 'evt_from_another_request', error: MISSING }] },
  });
  assert.deepEqual(statuses(r), ['rejected', 'undeliverable', 'undeliverable'], JSON.stringify(r.results));
  assertInconsistent(r, 207, 'errors[1].event_id is not the id of the event sent at index 1');
  assert.ok(r.results.every((x) => x.status !== 'undeliverable' || !x.error.message.includes('evt_from_another_request')));
  // An event sent without an id (generateIds: false) named by an id in the body is a mismatch too.
  const s = await scripted([{ status: 207, body: { accepted: 0, rejected: 1, errors: [{ index: 0, event_id: 'x1', error: MISSING }] } }]);
  const c = s.client({ generateIds: false });
  try {
    const x = await c.send([{ timestamp: 1746558464, event_type: 'page_view' }]);
    assert.deepEqual(statuses(x), ['undeliverable'], JSON.stringify(x.results));
    assert.equal((x.results[0] as UndeliverableEvent).error.code, 'INCONSISTENT_RESPONSE');
  } finally {
    await c.close();
    await s.close();
  }
});

test('more than three problems: three are named, the rest counted', async () => {
  const r = await sendAbc({
    status: 207,
    body: { accepted: 'x', rejected: 2, errors: [{ index: 9 }, 'not an object', { index: 0, event_id: 7 }, { index: 1, event_id: 'other' }] },
  });
  assert.deepEqual(statuses(r), ['undeliverable', 'undeliverable', 'undeliverable']);
  assertInconsistent(r, 207, 'accepted is missing or not a whole number; rejected is 2 but errors lists 4; errors[0].index is not a whole number from 0 to 2; and 3 more');
});

test('a 207 without an errors list, or whose body is not an object, accepts nothing', async () => {
  for (const body of [{ accepted: 2, rejected: 1 }, { accepted: 2, rejected: 1, errors: { index: 0 } }, 'not an object']) {
    const r = await sendAbc({ status: 207, body });
    assert.deepEqual(statuses(r), ['undeliverable', 'undeliverable', 'undeliverable'], JSON.stringify(r.results));
    assertInconsistent(r, 207, '207 without an errors list');
  }
});

test('a multi-status 400 that adds up rejects every event; one that claims accepted events accepts nothing', async () => {
  const all = [0, 1, 2].map((index) => ({ index, event_id: ['a', 'b', 'c'][index], error: MISSING }));
  const ok = await sendAbc({ status: 400, body: { accepted: 0, rejected: 3, errors: all } });
  assert.deepEqual(counts(ok), [0, 3, 0, 3]);
  assert.ok(ok.results.every((x) => x.status === 'rejected' && x.error.code === 'MISSING_FIELD' && x.httpStatus === 400), JSON.stringify(ok.results));
  const r = await sendAbc({ status: 400, body: { accepted: 2, rejected: 1, errors: [all[0]] } });
  assert.deepEqual(statuses(r), ['rejected', 'undeliverable', 'undeliverable'], JSON.stringify(r.results));
  assertInconsistent(r, 400, 'a 400 accepts no event, yet accepted is 2');
  // A 400 listing only some events (the old reading: the rest "rejected with the request") does not add up either.
  const partial = await sendAbc({ status: 400, body: { accepted: 0, rejected: 1, errors: [all[2]] } });
  assert.deepEqual(statuses(partial), ['undeliverable', 'undeliverable', 'rejected'], JSON.stringify(partial.results));
  assertInconsistent(partial, 400, 'accepted 0 + rejected 1 is not the 3 events sent');
});

test('an inconsistent body is per request: the send goes on, and the next request\'s 207 is read on its own', async () => {
  const s = await scripted((seen, n) =>
    n === 0
      ? { status: 207, body: { accepted: 1, rejected: 0, errors: [] } }
      : { status: 207, body: { accepted: 1, rejected: 1, errors: [{ index: 0, event_id: seen.events[0]!.id, error: MISSING }] } },
  );
  const c = s.client({ maxEventsPerRequest: 2, concurrency: 1 });
  try {
    const r = await c.send(['a', 'b', 'c', 'd'].map(ev));
    assert.deepEqual(statuses(r), ['undeliverable', 'undeliverable', 'rejected', 'accepted'], JSON.stringify(r.results));
    assert.deepEqual([...counts(r), r.requests, r.failure], [1, 1, 2, 4, 2, undefined]);
    assert.equal((r.results[0] as UndeliverableEvent).error.code, 'INCONSISTENT_RESPONSE');
  } finally {
    await c.close();
    await s.close();
  }
});

test('a 200 whose accepted is one less than the events sent accepts nothing: every event is INCONSISTENT_RESPONSE, not retried', async () => {
  const r = await sendAbc({ status: 200, body: { accepted: 2 } });
  assert.deepEqual(statuses(r), ['undeliverable', 'undeliverable', 'undeliverable'], JSON.stringify(r.results));
  assert.deepEqual([...counts(r), r.requests, r.retries, r.ok], [0, 0, 3, 3, 1, 0, false]);
  assertInconsistent(r, 200, 'accepted 2 is not the 3 events sent');
  const one = await sendAbc({ status: 200, body: { accepted: 0 } }, ['a']);
  assertInconsistent(one, 200, 'accepted 0 is not the 1 event sent');
});

test('a 200 with an HTML page (a proxy or captive portal) accepts nothing; the message quotes none of the page', async () => {
  const page = '<!DOCTYPE html><html><head><title>Sign in to Hotel Wi-Fi</title></head><body>Accept the terms to continue</body></html>';
  const r = await sendAbc({ status: 200, raw: page, headers: { 'content-type': 'text/html; charset=utf-8' } });
  assert.deepEqual(statuses(r), ['undeliverable', 'undeliverable', 'undeliverable'], JSON.stringify(r.results));
  assertInconsistent(r, 200, 'the body is not a JSON object');
  assert.ok(r.results.every((x) => x.status === 'undeliverable' && !/html|Wi-Fi|terms/i.test(x.error.message)));
  // JSON that is not an object is no success body either.
  for (const raw of ['[3]', '3', 'null', '"accepted"']) assertInconsistent(await sendAbc({ status: 200, raw }), 200, 'the body is not a JSON object');
});

test('a 200 with an empty body accepts nothing', async () => {
  const r = await sendAbc({ status: 200, raw: '' });
  assert.deepEqual(statuses(r), ['undeliverable', 'undeliverable', 'undeliverable'], JSON.stringify(r.results));
  assertInconsistent(r, 200, 'the body is empty');
});

test('a 200 whose accepted is missing or not a whole number from 0 accepts nothing', async () => {
  for (const body of [{}, { accepted: null }, { accepted: '3' }, { accepted: 2.5 }, { accepted: -3 }, { accepted: true }, { error: 'ok' }]) {
    const r = await sendAbc({ status: 200, body });
    assert.deepEqual(statuses(r), ['undeliverable', 'undeliverable', 'undeliverable'], JSON.stringify(body));
    assertInconsistent(r, 200, 'accepted is missing or not a whole number');
  }
});

test('a 200 whose accepted is the number of events sent is believed: every event accepted', async () => {
  const r = await sendAbc({ status: 200, body: { accepted: 3 } });
  assert.deepEqual(statuses(r), ['accepted', 'accepted', 'accepted'], JSON.stringify(r.results));
  assert.deepEqual([...counts(r), r.ok], [3, 0, 0, 3, true]);
  assert.ok(r.results.every((x) => x.status === 'accepted' && x.requestId === 'req_1'));
  // Members the spec does not name are no reason to doubt it.
  assert.deepEqual(counts(await sendAbc({ status: 200, body: { accepted: 3, note: 'extra' } })), [3, 0, 0, 3]);
});

test('an inconsistent 200 is per request: the send goes on, and the next request\'s 200 is read on its own', async () => {
  const s = await scripted(signed({ status: 200, body: { accepted: 1 } }));
  const c = s.client({ maxEventsPerRequest: 2, concurrency: 1 });
  try {
    const r = await c.send(['a', 'b', 'c'].map(ev));
    assert.deepEqual(statuses(r), ['undeliverable', 'undeliverable', 'accepted'], JSON.stringify(r.results));
    assert.deepEqual([...counts(r), r.requests, r.failure], [1, 0, 2, 3, 2, undefined]);
    assert.equal((r.results[0] as UndeliverableEvent).error.message, `inconsistent 200 response: accepted 1 is not the 2 events sent; ${SAFE}`);
  } finally {
    await c.close();
    await s.close();
  }
});

test('track(): a batch answered by a 200 that does not add up is undeliverable with INCONSISTENT_RESPONSE, not accepted', async () => {
  const s = await scripted(signed({ status: 200, body: { accepted: 2 } }));
  const batches: SendResult[] = [];
  const c = s.client({ flushIntervalMs: 3_600_000, onBatch: (r) => batches.push(r) });
  try {
    for (const id of ['a', 'b', 'c']) c.track(ev(id));
    const stats: TrackStats = await c.flush();
    assert.deepEqual([stats.accepted, stats.rejected, stats.undeliverable, stats.batches], [0, 0, 3, 1]);
    assert.equal(s.seen.length, 1, 'not retried');
    assert.deepEqual(
      batches[0]!.results.map((x) => (x.status === 'undeliverable' ? [x.id, x.error.code, x.error.httpStatus, x.error.message] : x.status)),
      ['a', 'b', 'c'].map((id) => [id, 'INCONSISTENT_RESPONSE', 200, `inconsistent 200 response: accepted 2 is not the 3 events sent; ${SAFE}`]),
    );
  } finally {
    await c.close();
    await s.close();
  }
});
