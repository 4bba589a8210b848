/** Unit tests of the pure pieces of the request path. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { gatewayAnswer, pathOf } from '../../src/http/gateway.js';
import { acceptsJson, isJsonContentType } from '../../src/http/media-types.js';
import { parseEvents } from '../../src/http/payload.js';
import { parseDurationMs } from '../../src/control/duration.js';
import { RequestError } from '../../src/errors.js';

test('pathOf drops the query string', () => {
  assert.equal(pathOf('/v1/events?a=1&b=2'), '/v1/events');
  assert.equal(pathOf('/v1/events'), '/v1/events');
});

test('gateway: only POST /v1/events passes', () => {
  assert.equal(gatewayAnswer('POST', '/v1/events', undefined), null);
  assert.equal(gatewayAnswer('POST', '/v2/events', undefined)!.status, 404);
  assert.equal(gatewayAnswer('POST', '/v1/events/', undefined)!.status, 403);
  assert.equal(gatewayAnswer('GET', '/v2/events', undefined)!.status, 403);
  assert.equal(gatewayAnswer('HEAD', '/v1/events', undefined)!.status, 403);
  // echo -n 'AWS4 x' | openssl dgst -sha256 -binary | base64
  assert.match(gatewayAnswer('GET', '/', 'AWS4 x')!.body, /'cZM9AviRd\/hvcS2uzpH88tTyGbS1OTePr5XwpslaDH4='/);
});

test('content type and accept negotiation', () => {
  assert.equal(isJsonContentType('application/json'), true);
  assert.equal(isJsonContentType('Application/JSON; charset="UTF-8"'), true);
  assert.equal(isJsonContentType('application/json; charset=iso-8859-1'), false);
  assert.equal(isJsonContentType('application/jsonp'), false);
  assert.equal(isJsonContentType(undefined), false);
  assert.equal(acceptsJson(undefined), true);
  assert.equal(acceptsJson('text/html, application/*;q=0.1'), true);
  assert.equal(acceptsJson('text/html'), false);
  assert.equal(acceptsJson('application/json;q=0'), false);
});

test('Accept negotiation follows RFC 9110 12.5.1: the most specific matching range decides', () => {
  const cases: ReadonlyArray<readonly [string | undefined, boolean]> = [
    [undefined, true],
    ['', true],
    ['application/json', true],
    ['*/*', true],
    ['Application/JSON', true],
    ['application/json; charset=utf-8', true],
    ['application/json, text/plain, */*', true],
    ['application/*;q=0, application/json', true],
    ['application/json;q=0.001', true],
    // A more specific range with q=0 excludes JSON whatever a wider range says (issue 18).
    ['application/json;q=0, */*', false],
    ['*/*;q=0.5, application/json;q=0', false],
    ['application/json;q=0, application/*', false],
    ['text/html, */*;q=0', false],
    ['*/*;q=0', false],
    ['application/problem+json', false],
    ['text/html', false],
  ];
  for (const [header, expected] of cases) assert.equal(acceptsJson(header), expected, JSON.stringify(header));
});

test('payload: a BOM is tolerated, duplicate keys keep the last value', () => {
  assert.deepEqual(parseEvents(Buffer.from('\uFEFF{"a":1}', 'utf8')), [{ a: 1 }]);
  assert.deepEqual(parseEvents(Buffer.from('{"a":1,"a":2}')), [{ a: 2 }]);
  assert.deepEqual(parseEvents(Buffer.from('{"events":[{"x":1},{"y":2}]}')), [{ x: 1 }, { y: 2 }]);
  assert.throws(() => parseEvents(Buffer.from('{"events":[1],"events2":1}')), (e: RequestError) => e.code === 'PAYLOAD_SHAPE');
  assert.throws(() => parseEvents(Buffer.from('{"a":\\u0031}')), (e: RequestError) => e.code === 'INVALID_JSON');
  // A key spelled with unicode escapes is still the prototype key.
  assert.throws(() => parseEvents(Buffer.from('{"ext":{"\\u005f_proto__":{"x":1}}}')), (e: RequestError) => e.code === 'INVALID_JSON' && e.message.includes('__proto__'));
  assert.deepEqual(parseEvents(Buffer.from('{"name":"caf\\u00e9"}')), [{ name: 'café' }]);
});

test('durations', () => {
  assert.equal(parseDurationMs('30s'), 30_000);
  assert.equal(parseDurationMs('10m'), 600_000);
  assert.equal(parseDurationMs('1h'), 3_600_000);
  assert.equal(parseDurationMs('90d'), 90 * 86_400_000);
  assert.equal(parseDurationMs('250ms'), 250);
  assert.throws(() => parseDurationMs('1 hour'), /invalid duration/);
});
