import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_BODY_BYTES, WRAPPER_BYTES, batchBytes, buildBody, packLimits, planRequests, prepareEvents, type EventInput } from '../src/index.js';

const L = { maxEvents: 1000, maxBytes: MAX_BODY_BYTES };

test('no events, no requests', () => {
  assert.deepEqual(planRequests([], L), { requests: [], oversize: [] });
});

test('1,000 events fit one request; 1,001 need two; 2,000 two; 2,001 three', () => {
  for (const [n, expected] of [[1, [1]], [1000, [1000]], [1001, [1000, 1]], [2000, [1000, 1000]], [2001, [1000, 1000, 1]]] as const) {
    const plan = planRequests(new Array(n).fill(100), L);
    assert.deepEqual(plan.requests.map((r) => r.items.length), expected, `${n} events`);
    assert.deepEqual(plan.requests.flatMap((r) => r.items), Array.from({ length: n }, (_, i) => i), 'every event once, in order');
  }
});

test('byte boundary: a body of exactly 1,048,576 bytes is one request, one byte more is two', () => {
  // 4 events: body = 11 + 2 + 3 commas + sizes.
  const exact = [262_140, 262_140, 262_140, MAX_BODY_BYTES - WRAPPER_BYTES - 3 - 3 * 262_140];
  assert.equal(batchBytes(exact), MAX_BODY_BYTES);
  const one = planRequests(exact, L);
  assert.deepEqual(one.requests.map((r) => [r.items.length, r.bytes]), [[4, MAX_BODY_BYTES]]);
  const over = [...exact.slice(0, 3), exact[3]! + 1];
  const two = planRequests(over, L);
  assert.deepEqual(two.requests.map((r) => r.items), [[0, 1, 2], [3]]);
  assert.ok(two.requests.every((r) => r.bytes <= MAX_BODY_BYTES));
});

test('reported sizes equal the built bodies, byte for byte, with multi-byte characters', () => {
  const events = Array.from({ length: 2500 }, (_, i) => JSON.stringify({ id: `é-${i}`, pad: '€'.repeat(i % 400) }));
  const sizes = events.map((e) => Buffer.byteLength(e));
  const plan = planRequests(sizes, { maxEvents: 1000, maxBytes: 200_000 });
  for (const r of plan.requests) {
    const body = buildBody(events, r);
    assert.equal(body.length, r.bytes);
    assert.ok(body.length <= 200_000);
    assert.deepEqual(JSON.parse(body.toString('utf8')).events.map((e: { id: string }) => e.id), r.items.map((i) => `é-${i}`));
  }
});

test('greedy packing is minimal for an order-preserving split (exhaustive on small inputs)', () => {
  const limits = { maxEvents: 3, maxBytes: 40 };
  // Fewest contiguous chunks by dynamic programming, for comparison.
  const optimal = (sizes: number[]) => {
    const best = new Array(sizes.length + 1).fill(Infinity);
    best[0] = 0;
    for (let end = 1; end <= sizes.length; end++) {
      for (let start = end - 1; start >= 0 && end - start <= limits.maxEvents; start--) {
        if (batchBytes(sizes.slice(start, end)) <= limits.maxBytes) best[end] = Math.min(best[end], best[start] + 1);
      }
    }
    return best[sizes.length];
  };
  let seed = 7;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  for (let round = 0; round < 500; round++) {
    const sizes = Array.from({ length: 1 + Math.floor(rnd() * 12) }, () => 1 + Math.floor(rnd() * 25));
    const plan = planRequests(sizes, limits);
    assert.equal(plan.requests.length, optimal(sizes), JSON.stringify(sizes));
    for (const r of plan.requests) {
      assert.ok(r.items.length <= limits.maxEvents);
      assert.ok(r.bytes <= limits.maxBytes);
      assert.equal(r.bytes, batchBytes(r.items.map((i) => sizes[i]!)));
    }
  }
});

test('an event too big for the wrapper but within the limit goes alone as a bare body; a bigger one is refused', () => {
  const bareOnly = MAX_BODY_BYTES - 5;
  const plan = planRequests([10, bareOnly, 10, MAX_BODY_BYTES + 1, 10], L);
  assert.deepEqual(plan.requests.map((r) => [r.items, r.bare]), [[[0], false], [[1], true], [[2, 4], false]]);
  assert.deepEqual(plan.oversize, [3]);
  const body = buildBody(['a', '{"x":1}'], { items: [1], bytes: 7, bare: true });
  assert.equal(body.toString(), '{"x":1}');
});

test('limits are validated and clamped to the wire contract', () => {
  assert.deepEqual(packLimits(), { maxEvents: 1000, maxBytes: MAX_BODY_BYTES });
  assert.throws(() => packLimits({ maxEvents: 1001 }), RangeError);
  assert.throws(() => packLimits({ maxEvents: 0 }), RangeError);
  assert.throws(() => packLimits({ maxBytes: MAX_BODY_BYTES + 1 }), RangeError);
});

test('prepareEvents: ids, data set, validation, serialization once, local rejections', () => {
  const ok = { timestamp: 1746558464, event_type: 'purchase', value: 1, currency_code: 'USD' } as const;
  const prep = prepareEvents([
    ok,
    { ...ok, id: 'mine' },
    { ...ok, data_set_id: 'other' },
    { ...ok, value: undefined, currency_code: undefined, event_type: 'nope' } as unknown as EventInput,
    'not an object' as unknown as EventInput,
    { ...ok, user_data: { email_address: ['plain@example.com'] } },
  ], { dataSetId: 'shop' });
  assert.match(prep.ids[0]!, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.equal(prep.ids[1], 'mine');
  assert.deepEqual(JSON.parse(prep.serialized[0]!), { data_set_id: 'shop', ...ok, id: prep.ids[0] });
  assert.deepEqual(prep.rejected.map((r) => [r.index, r.error.code, r.error.message]), [
    [2, 'INVALID_FIELD', 'invalid field data_set_id: must equal the client\'s data set "shop" (X-Service-Data-Set)'],
    [3, 'SCHEMA', 'schema validation failed: event_type must be one of the ECAPI 1.0 event types, got "nope"'],
    [4, 'SCHEMA', 'schema validation failed: event must be a JSON object'],
    [5, 'NOT_HASHED', 'hashed field user_data.email_address[0] is not a 64-char lowercase hex sha256'],
  ]);
  assert.deepEqual(prep.requests.map((r) => r.items), [[0, 1]]);

  const noIds = prepareEvents([ok], { dataSetId: 'shop', generateIds: false, validate: false });
  assert.equal(noIds.ids[0], null);
  const hashed = prepareEvents([{ ...ok, user_data: { email_address: [' User@example.com '] } }], { dataSetId: 'shop', hash: true });
  assert.deepEqual(hashed.rejected, []);
  assert.deepEqual(JSON.parse(hashed.serialized[0]!).user_data.email_address, ['b4c9a289323b21a01c3e940f150eb9b8c542587f1abfd8f0e1cc1ffc5e475514']);
  const bad = prepareEvents([{ ...ok, user_data: { phone_numbers: ['12'] } }], { dataSetId: 'shop', hash: true });
  assert.equal(bad.rejected[0]!.error.code, 'NORMALIZATION');
  assert.match(bad.rejected[0]!.error.message, /^normalization failed: user_data\.phone_numbers\[0\]/);
});

test('an event no request can carry is EVENT_TOO_LARGE, with its size and the limit that applies', () => {
  const big = { timestamp: 1746558464, event_type: 'purchase', value: 1, currency_code: 'USD', properties: { page_url: `https://shop.example.com/${'a'.repeat(2000)}` } } as const;
  const size = (prep: ReturnType<typeof prepareEvents>) => Buffer.byteLength(JSON.stringify(prep.prepared[0]));
  const small = prepareEvents([big], { dataSetId: 'shop', maxBodyBytes: 1000 });
  assert.deepEqual(small.requests, []);
  assert.equal(small.rejected[0]!.error.code, 'EVENT_TOO_LARGE');
  assert.equal(small.rejected[0]!.error.message, `event is ${size(small)} bytes serialized, over the maxBodyBytes limit of 1000 bytes on its own: no request can carry it; make it smaller`);
  const huge = prepareEvents([{ ...big, properties: { page_url: `https://shop.example.com/${'a'.repeat(MAX_BODY_BYTES)}` } }], { dataSetId: 'shop' });
  assert.equal(huge.rejected[0]!.error.message, `event is ${size(huge)} bytes serialized, over the service's limit of 1048576 bytes (1 MB) per request on its own: no request can carry it; make it smaller`);
});
