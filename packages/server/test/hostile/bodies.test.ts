/**
 * Hostile bodies, each with a valid signature so that it reaches the parser: input -> exact outcome.
 * Complements test/http/public-endpoint.test.ts (plain __proto__, empty body, null, bare array,
 * one invalid UTF-8 sequence, 1 MiB padding in ext) with nesting, numbers, duplicate keys, more
 * encodings and 1 MiB strings in typed fields. After each case the server still serves.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { parseEvents } from '../../src/http/payload.js';
import { RequestError } from '../../src/errors.js';
import { exportQueue, provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import { postSigned, sampleEvent, type Credentials } from '../helpers/https-client.js';

const DS = 'bodies';
let server: ServerProcess;
let dataDir: string;
let creds: Credentials;

before(async () => {
  dataDir = tempDataDir();
  creds = await provision(dataDir, [DS]);
  server = await startServer({ dataDir, args: ['--no-worker'] });
});
after(async () => {
  assert.equal(await server.stop(), 0);
});

const post = (body: string | Buffer, http2 = false) => postSigned(server.port, server.ca, creds, DS, body, { http2 });

async function assertStillServing(): Promise<void> {
  const res = await post(JSON.stringify(sampleEvent(DS)));
  assert.equal(res.status, 200, 'the server still accepts a valid event');
  assert.equal(server.child.exitCode, null, 'the server process is alive');
}

async function expectRequestError(body: string | Buffer, error: string, http2 = false): Promise<void> {
  const res = await post(body, http2);
  assert.equal(res.status, 400, res.text.slice(0, 300));
  assert.deepEqual(res.json(), { error });
}

const event = (overrides: Record<string, unknown> = {}) => sampleEvent(DS, overrides);
/** `{"a":` repeated: n levels of objects around a 1. */
const nestedObjects = (n: number) => '{"a":'.repeat(n) + '1' + '}'.repeat(n);
const nestedArrays = (n: number) => '['.repeat(n) + ']'.repeat(n);
/** A bare event whose ext nests to `n` more levels (event = 1, ext = 2, ...). */
const withExt = (extJson: string) => JSON.stringify(event({ ext: '__EXT__' })).replace('"__EXT__"', extJson);

describe('prototype keys are inert', () => {
  const cases = [
    '{"__proto__":{"polluted":1},"data_set_id":"bodies"}',
    '{"events":[{"data_set_id":"bodies","ext":{"x":[{"__proto__":{"polluted":1}}]}}]}',
    '{"data_set_id":"bodies","ext":{"\\u005f\\u005fproto\\u005f\\u005f":{"polluted":1}}}',
    '{"data_set_id":"bodies","properties":{"constructor":{"prototype":{"polluted":1}}}}',
    '{"data_set_id":"bodies","ext":{"constructor":{"\\u0070rototype":{"polluted":1}}}}',
  ];
  test('in-process: refused, Object.prototype untouched', () => {
    for (const body of cases) {
      assert.throws(() => parseEvents(Buffer.from(body)), (e: RequestError) => e.code === 'INVALID_JSON', body);
      assert.equal(({} as Record<string, unknown>).polluted, undefined);
      assert.equal(Object.prototype.hasOwnProperty.call(Object.prototype, 'polluted'), false);
    }
  });
  test('black-box: 400 invalid JSON over HTTP/1.1 and HTTP/2, server unaffected', async () => {
    for (const body of cases) {
      for (const http2 of [false, true]) {
        await expectRequestError(body, 'invalid JSON: keys "__proto__" and "constructor.prototype" are not allowed', http2);
      }
    }
    // A key merely named "constructor" (no prototype below it) is data like any other.
    const res = await post(withExt('{"constructor":"x","proto":{"__x":1}}'));
    assert.equal(res.status, 200, res.text);
    await assertStillServing();
  });
});

describe('nesting', () => {
  test('100,000 levels inside ext: a fast, clean 400 and the server survives', { timeout: 30_000 }, async () => {
    for (const ext of [nestedObjects(100_000), nestedArrays(100_000), `[${nestedObjects(50_000)},${nestedArrays(50_000)}]`]) {
      for (const http2 of [false, true]) {
        const started = performance.now();
        await expectRequestError(withExt(ext), 'invalid JSON: nesting deeper than 64 levels', http2);
        assert.ok(performance.now() - started < 10_000, 'answered well within the request timeout');
      }
    }
    // Also in a batch, and combined with a prototype key (the secure parser's path).
    await expectRequestError(JSON.stringify({ events: [event()] }).replace('"source":"website"', `"source":"website","ext":${nestedArrays(100_000)}`), 'invalid JSON: nesting deeper than 64 levels');
    await expectRequestError(withExt(`{"constructor":1,"x":${nestedObjects(100_000)}}`), 'invalid JSON: nesting deeper than 64 levels');
    await assertStillServing();
  });
  test('64 levels are accepted and stored intact, 65 are refused', async () => {
    // The event is level 1 and ext (the outermost of the nested objects) level 2: 63 objects reach 64.
    const ok = event({ ext: JSON.parse(nestedObjects(63)) });
    const res = await post(JSON.stringify(ok));
    assert.equal(res.status, 200, res.text);
    const stored = (await exportQueue(dataDir)).find((r) => r.event.id === ok.id);
    assert.deepEqual(stored?.event, ok);
    await expectRequestError(JSON.stringify(event({ ext: JSON.parse(nestedObjects(64)) })), 'invalid JSON: nesting deeper than 64 levels');
    // In a batch the wrapper and its array count too: ext is level 4, 61 objects reach 64.
    const batch = JSON.stringify({ events: [event({ ext: JSON.parse(nestedObjects(61)) })] });
    assert.equal((await post(batch)).status, 200);
    await expectRequestError(JSON.stringify({ events: [event({ ext: JSON.parse(nestedObjects(62)) })] }), 'invalid JSON: nesting deeper than 64 levels');
  });
});

describe('numbers', () => {
  const outOfRange = 'invalid JSON: number out of range (must be a finite double)';
  test('numbers that parse to ±Infinity are refused wherever they are, and nothing is stored', async () => {
    const bodies = [
      JSON.stringify(event({ id: 'inf-1' })).replace('"value":19.99', '"value":1e400'),
      JSON.stringify(event({ id: 'inf-2' })).replace('"timestamp":', '"timestamp":1e999,"x_timestamp":'),
      withExt('{"big":-1e400}'),
      withExt(`{"digits":${'9'.repeat(400)}}`),
      JSON.stringify({ events: [event({ id: 'inf-3' }), event({ id: 'inf-4', properties: { n: 0 } })] }).replace('"n":0', '"n":1E+309'),
    ];
    for (const body of bodies) await expectRequestError(body, outOfRange);
    const ids = new Set((await exportQueue(dataDir)).map((r) => r.event.id));
    for (const id of ['inf-1', 'inf-2', 'inf-3', 'inf-4']) assert.ok(!ids.has(id));
  });
  test('NaN, Infinity and other non-JSON literals are invalid JSON', async () => {
    for (const literal of ['NaN', 'Infinity', '-Infinity', '0x10', '+1', '.5', '01']) {
      const res = await post(JSON.stringify(event()).replace('"value":19.99', `"value":${literal}`));
      assert.equal(res.status, 400, literal);
      assert.match(res.json().error, /^invalid JSON: /, literal);
    }
  });
  test('finite extremes are kept: 1e-400 underflows to 0, 1.7976931348623157e308 is stored', async () => {
    const tiny = event({ id: 'tiny' });
    const res = await post(JSON.stringify(tiny).replace('"source":"website"', '"source":"website","ext":{"t":1e-400,"m":1.7976931348623157e308}'));
    assert.equal(res.status, 200, res.text);
    const stored = (await exportQueue(dataDir)).find((r) => r.event.id === 'tiny');
    assert.deepEqual(stored?.event.ext, { t: 0, m: Number.MAX_VALUE });
  });
});

describe('duplicate keys: the last one wins', () => {
  test('the stored event is the last occurrence of each key', async () => {
    const body = JSON.stringify(event({ id: 'dup-first' })).replace('"id":"dup-first"', '"id":"dup-first","id":"dup-last"');
    const res = await post(body);
    assert.equal(res.status, 200, res.text);
    const records = await exportQueue(dataDir);
    assert.equal(records.filter((r) => r.event.id === 'dup-first').length, 0);
    assert.equal(records.filter((r) => r.event.id === 'dup-last').length, 1);
  });
  test('validation sees the last occurrence too', async () => {
    const invalidLast = JSON.stringify(event({ id: 'dup-bad' })).replace('"event_type":"purchase"', '"event_type":"purchase","event_type":"not-a-type"');
    const res = await post(invalidLast);
    assert.equal(res.status, 400);
    assert.equal(res.json().accepted, 0);
    assert.equal(res.json().errors[0].event_id, 'dup-bad');
    assert.match(res.json().errors[0].error, /^schema validation failed: .*event_type/);
    const validLast = JSON.stringify(event({ id: 'dup-good' })).replace('"event_type":"purchase"', '"event_type":"not-a-type","event_type":"purchase"');
    assert.equal((await post(validLast)).status, 200);
    const wrapper = `{"events":[${JSON.stringify(event({ id: 'dup-w1' }))}],"events":[${JSON.stringify(event({ id: 'dup-w2' }))}]}`;
    assert.deepEqual((await post(wrapper)).json(), { accepted: 1 });
    const ids = new Set((await exportQueue(dataDir)).map((r) => r.event.id));
    assert.ok(ids.has('dup-good') && ids.has('dup-w2') && !ids.has('dup-w1') && !ids.has('dup-bad'));
  });
});

describe('encodings and degenerate bodies', () => {
  const notUtf8 = 'invalid JSON: body is not valid UTF-8';
  const json = Buffer.from(JSON.stringify(event({ id: 'enc', source: 'X' })));
  const withBytes = (bytes: number[]) => {
    const at = json.indexOf('"X"') + 1;
    return Buffer.concat([json.subarray(0, at), Buffer.from(bytes), json.subarray(at + 1)]);
  };
  const cases: [string, Buffer | string, string][] = [
    ['overlong "/" (C0 AF)', withBytes([0xc0, 0xaf]), notUtf8],
    ['UTF-16 surrogate encoded in UTF-8 (ED A0 80)', withBytes([0xed, 0xa0, 0x80]), notUtf8],
    ['code point above U+10FFFF (F4 90 80 80)', withBytes([0xf4, 0x90, 0x80, 0x80]), notUtf8],
    ['lone continuation byte', withBytes([0x80]), notUtf8],
    ['truncated sequence at the end', Buffer.concat([json, Buffer.from([0xe2, 0x82])]), notUtf8],
    ['Latin-1 é', withBytes([0xe9]), notUtf8],
    ['UTF-16LE body with its BOM', Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(json.toString('utf8'), 'utf16le')]), notUtf8],
    ['two byte order marks', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf, 0xef, 0xbb, 0xbf]), json]), 'invalid JSON: '],
    ['only a BOM', Buffer.from([0xef, 0xbb, 0xbf]), 'invalid JSON: empty body'],
    ['whitespace only', ' \r\n\t ', 'invalid JSON: '],
    ['NUL byte', Buffer.from([0x00]), 'invalid JSON: '],
    ['empty array', '[]', 'payload must be an object or {events:[...]}'],
    ['true', 'true', 'payload must be an object or {events:[...]}'],
    ['a number', '123', 'payload must be an object or {events:[...]}'],
    ['trailing garbage', JSON.stringify(event()) + 'x', 'invalid JSON: '],
    ['two JSON documents', JSON.stringify(event()) + JSON.stringify(event()), 'invalid JSON: '],
  ];
  for (const [name, body, message] of cases) {
    test(name, async () => {
      const res = await post(body);
      assert.equal(res.status, 400, res.text);
      const { error } = res.json() as { error: string };
      if (message.endsWith(': ')) assert.ok(error.startsWith(message) && error.length > message.length, error);
      else assert.equal(error, message);
    });
  }
  test('a BOM before a batch is skipped; escaped non-ASCII is decoded; the stored event is what was sent', async () => {
    const batchEvent = event({ id: 'bom-batch', properties: { name: 'caf\u00e9 \u{1f600}' } });
    const body = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify({ events: [batchEvent] }))]);
    assert.equal((await post(body)).status, 200);
    const stored = (await exportQueue(dataDir)).find((r) => r.event.id === 'bom-batch');
    assert.deepEqual(stored?.event, batchEvent);
    await assertStillServing();
  });
});

describe('1 MiB strings', () => {
  const fill = (field: string, target: number) => {
    const e = event({ id: `big-${field}`, [field]: '' });
    const base = Buffer.byteLength(JSON.stringify(e));
    e[field] = 'z'.repeat(target - base);
    return { e, text: JSON.stringify(e) };
  };
  test('a 1 MiB string in a typed field is answered per event, without echoing it', async () => {
    const { text } = fill('event_type', 1_048_576);
    assert.equal(Buffer.byteLength(text), 1_048_576);
    const res = await post(text);
    assert.equal(res.status, 400);
    assert.ok(res.text.length < 1000, 'the answer does not echo the string');
    assert.equal(res.json().errors[0].error.startsWith('schema validation failed: '), true, res.text);
  });
  test('a 1 MiB id is accepted and stored intact (ids have no length limit in ECAPI 1.0)', async () => {
    const { e, text } = fill('id', 1_048_576);
    const res = await post(text, true);
    assert.equal(res.status, 200, res.text.slice(0, 200));
    const stored = (await exportQueue(dataDir)).find((r) => r.event.id === e.id);
    assert.equal(stored?.event.id.length, (e.id as string).length);
  });
  test('a 1 MiB string of escapes (\\u0041 x 174,762) decodes and is stored; the limit counts raw bytes', async () => {
    const e = event({ id: 'escapes', properties: { s: '' } });
    const base = Buffer.byteLength(JSON.stringify(e));
    const count = Math.floor((1_048_576 - base) / 6);
    const text = JSON.stringify(e).replace('"s":""', `"s":"${'\\u0041'.repeat(count)}"`);
    assert.ok(Buffer.byteLength(text) <= 1_048_576);
    assert.equal((await post(text)).status, 200);
    const stored = (await exportQueue(dataDir)).find((r) => r.event.id === 'escapes');
    assert.equal(stored?.event.properties.s, 'A'.repeat(count));
    await assertStillServing();
  });
});
