/**
 * The base URL is checked before anything is sent: plain http:// (loopback too) and a URL that
 * already ends in /v1/events are refused with a message saying what to write instead.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Client, parseBaseUrl } from '../src/index.js';

const options = { keyId: 'k', secret: 's', dataSetId: 'd' };

test('plain http:// is refused, loopback included, with the https:// URL to use', () => {
  for (const [url, suggested] of [
    ['http://127.0.0.1:8443', 'https://127.0.0.1:8443'],
    ['http://localhost:8443/', 'https://localhost:8443'],
    ['http://ingest.example.com/ecapi', 'https://ingest.example.com/ecapi'],
  ] as const) {
    assert.throws(() => new Client({ baseUrl: url, ...options }), (error: Error) => {
      assert.ok(error instanceof TypeError);
      assert.match(error.message, /^Client: baseUrl http:\/\/\S+ is plain http:\/\/: ecapi-ingest answers HTTPS \(TLS 1\.3\) only; use https:/);
      assert.ok(error.message.endsWith(`use ${suggested}`), error.message);
      return true;
    });
  }
});

test('a base URL ending in /v1/events is refused with the base URL to give', () => {
  assert.throws(() => new Client({ baseUrl: 'https://ingest.example.com:8443/v1/events', ...options }),
    /^TypeError: Client: baseUrl https:\/\/ingest\.example\.com:8443\/v1\/events ends in \/v1\/events, which the client adds itself: use https:\/\/ingest\.example\.com:8443$/);
  assert.throws(() => new Client({ baseUrl: 'https://h/prefix/v1/events/', ...options }), /use https:\/\/h\/prefix$/);
  assert.throws(() => new Client({ baseUrl: 'ingest.example.com', ...options }), /is not a URL: give the service's base URL, like https:\/\/ingest\.example\.com or https:\/\/127\.0\.0\.1:8443, without \/v1\/events/);
  assert.throws(() => new Client({ baseUrl: 'ftp://h', ...options }), /is not an https:\/\/ URL/);
});

test('a good base URL: origin, the events path after its own path', () => {
  assert.deepEqual(parseBaseUrl('https://h:8443/'), { origin: 'https://h:8443', path: '/v1/events', eventsUrl: 'https://h:8443/v1/events' });
  assert.deepEqual(parseBaseUrl('https://h/ecapi/'), { origin: 'https://h', path: '/ecapi/v1/events', eventsUrl: 'https://h/ecapi/v1/events' });
  assert.throws(() => parseBaseUrl('http://h', '--url'), /^TypeError: --url http:\/\/h is plain http:\/\//);
});

test('a user name or password in the base URL is refused (never sent) and never repeated in a message', () => {
  for (const url of ['https://user:hunter2@ingest.example.com', 'http://user:hunter2@ingest.example.com/x', 'https://user:hunter2@h/v1/events', 'ftp://user:hunter2@h', 'https://user:hunter2@[bad']) {
    assert.throws(() => new Client({ baseUrl: url, ...options }), (error: Error) => {
      assert.ok(error instanceof TypeError);
      assert.ok(!error.message.includes('hunter2'), error.message);
      assert.match(error.message, /\*\*\*@/);
      return true;
    }, url);
  }
  assert.throws(() => parseBaseUrl('https://user:hunter2@ingest.example.com/ecapi'),
    /^TypeError: baseUrl https:\/\/\*\*\*@ingest\.example\.com\/ecapi carries a user name or password, which is never sent: requests are authenticated by their signature \(keyId, secret\); use https:\/\/ingest\.example\.com\/ecapi$/);
});
