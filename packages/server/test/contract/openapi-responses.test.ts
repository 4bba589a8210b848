/**
 * Black-box: real requests of every status the OpenAPI document gives, sent to a real server process
 * (public port over TLS, admin port over HTTP), each answer checked against the document: the status
 * is documented for the operation, every header the document requires is there and every documented
 * header sent matches its schema, the Content-Type is one the document lists (none for the parser's
 * bare answers), and the body validates against the response schema, compiled by Ajv from the
 * document itself (so the document's own $refs and the inlined Event schema are what is checked).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { blockQueueCommits, cliJson, provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import { postSigned, request, sampleEvent, type Credentials } from '../helpers/https-client.js';
import { openRaw, parseResponses, signedHead } from '../helpers/raw-tls.js';
import { loadOpenApi } from '../helpers/openapi.js';

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;
const document = loadOpenApi();
const DOC_ID = 'https://ecapi-ingest.dev/openapi.json';
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
ajv.addSchema({ ...document, $id: DOC_ID });

const pointer = (...parts: string[]) => parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/');

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
}

/** Which (path, method, status) were checked: every documented one must be, by the last test. */
const covered = new Set<string>();

/** Checks one answer against the document's response for (path, method, status); returns the parsed body. */
function conforms(path: string, method: string, answer: Answer): unknown {
  const operation = document.paths[path]?.[method];
  assert.ok(operation, `${method.toUpperCase()} ${path} is not in the document`);
  const key = String(answer.status);
  let response = operation.responses[key];
  assert.ok(response, `${method.toUpperCase()} ${path}: status ${key} is not documented (body ${answer.text})`);
  covered.add(`${path} ${method} ${key}`);
  let responsePointer = `#/${pointer('paths', path, method, 'responses', key)}`;
  if (response.$ref) {
    responsePointer = response.$ref as string;
    response = document.components.responses[(response.$ref as string).split('/').pop()!];
  }
  const where = `${method.toUpperCase()} ${path} ${key}`;
  for (const [name, declared] of Object.entries<any>(response.headers ?? {})) {
    const header = declared.$ref ? document.components.headers[(declared.$ref as string).split('/').pop()!] : declared;
    const sent = answer.headers[name.toLowerCase()];
    // node:http gives Set-Cookie as an array; one cookie is set at a time here.
    const value = Array.isArray(sent) && sent.length === 1 ? sent[0] : sent;
    if (value === undefined) {
      assert.ok(!header.required, `${where}: required header ${name} missing`);
      continue;
    }
    const validate = ajv.compile({ $ref: `${DOC_ID}${declared.$ref ?? `${responsePointer}/headers/${pointer(name)}`}/schema` });
    assert.ok(validate(value), `${where}: header ${name}: ${JSON.stringify(value)} ${ajv.errorsText(validate.errors)}`);
  }
  const contentType = answer.headers['content-type'] as string | undefined;
  if (path === '/v1/events' && key === '400' && answer.text === '' && contentType === undefined) {
    // The HTTP/1.1 parser's bare 400 (framing errors), which the document describes beside the service's.
    assert.equal(answer.headers.connection, 'close', `${where}: the bare 400 closes the connection`);
    return undefined;
  }
  if (!response.content) {
    assert.equal(answer.text, '', `${where}: the document gives no body`);
    return undefined;
  }
  // The media type listed, exactly or without parameters (Fastify adds `; charset=utf-8` to JSON).
  const essence = (type: string) => type.split(';')[0]!.trim().toLowerCase();
  const listed = Object.keys(response.content).find((type) => type === contentType || (contentType !== undefined && !type.includes(';') && type === essence(contentType)));
  assert.ok(listed, `${where}: Content-Type ${contentType} not in ${Object.keys(response.content).join(', ')}`);
  const body = listed === 'application/json' ? JSON.parse(answer.text) : answer.text;
  const validate = ajv.compile({ $ref: `${DOC_ID}${responsePointer}/content/${pointer(listed)}/schema` });
  assert.ok(validate(body), `${where}: body ${answer.text.slice(0, 300)}: ${ajv.errorsText(validate.errors)}`);
  return body;
}

const ADMIN_TOKEN = 'c0ntract-test-admin-token-7f3a9b1d5e2c8f4a6b0d';
const DS = 'contract-shop';
let server: ServerProcess;
let dataDir: string;
let creds: Credentials;

before(async () => {
  dataDir = tempDataDir();
  creds = await provision(dataDir, [DS, 'contract-tight']);
  await cliJson(dataDir, ['data-set', 'limits', 'contract-tight', '--burst-rps', '2', '--rps', '1']);
  server = await startServer({
    dataDir,
    args: ['--admin-token', ADMIN_TOKEN, '--headers-timeout', '1s', '--failed-auth-burst', '10', '--failed-auth-rps', '1'],
  });
});
after(async () => {
  await server?.stop();
});

const post = (body: string, headers: Record<string, string> = {}, c: Credentials = creds, ds = DS) =>
  postSigned(server.port, server.ca, c, ds, body, { headers });
/** The public operation: the service's own answers (with a body) always carry X-Request-Id. */
const events = (answer: Answer) => {
  if (answer.text !== '') assert.match(String(answer.headers['x-request-id']), /^[0-9a-f-]{36}$/, `X-Request-Id on ${answer.status}`);
  return conforms('/v1/events', 'post', answer);
};

async function admin(method: string, path: string, options: { token?: string | null; host?: string; body?: unknown; cookie?: string } = {}): Promise<Answer> {
  const headers: Record<string, string> = {};
  const token = options.token === undefined ? ADMIN_TOKEN : options.token;
  if (token !== null) headers.authorization = `Bearer ${token}`;
  if (options.host) headers.host = options.host;
  if (options.cookie) headers.cookie = options.cookie;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  // node:http, not fetch: fetch may not set Host.
  const http = await import('node:http');
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: server.adminPort, method, path, headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (c: string) => (text += c)).on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text }));
    });
    req.on('error', reject);
    req.end(options.body === undefined ? undefined : JSON.stringify(options.body));
  });
}

/** One raw HTTP/1.1 exchange over TLS: what the server answered before it closed. */
async function raw(bytes: string): Promise<Answer> {
  const exchange = await openRaw(server.port, server.ca);
  await exchange.write(bytes);
  await exchange.closed;
  const [response] = parseResponses(exchange.received());
  assert.ok(response, `no answer to the raw request; got ${JSON.stringify(exchange.received())}`);
  return { status: response.status, headers: response.headers, text: response.body };
}

describe('public endpoint', () => {
  test('200, with X-Request-Id and the RateLimit headers', async () => {
    const answer = await post(JSON.stringify(sampleEvent(DS)));
    assert.equal(answer.status, 200);
    events(answer);
    assert.ok(answer.headers.ratelimit && answer.headers['ratelimit-policy'], 'RateLimit headers on a 200');
  });

  test('200 without an Accept header (it is optional)', async () => {
    const body = JSON.stringify(sampleEvent(DS));
    const answer = await post(body, { accept: '' });
    assert.equal(answer.status, 200, answer.text);
    events(answer);
  });

  test('207 and the all-rejected 400', async () => {
    const partial = await post(JSON.stringify({ events: [sampleEvent(DS), sampleEvent(DS, { event_type: 'nope' })] }));
    assert.equal(partial.status, 207);
    events(partial);
    assert.ok(partial.headers.ratelimit);
    const none = await post(JSON.stringify({ events: [sampleEvent(DS, { timestamp: undefined })] }));
    assert.equal(none.status, 400);
    assert.equal((events(none) as { accepted: number }).accepted, 0);
  });

  test('400 request-level errors', async () => {
    for (const [body, headers] of [
      ['{not json', {}],
      ['[]', {}],
      [JSON.stringify({ events: [] }), {}],
      [JSON.stringify(sampleEvent(DS)), { 'content-type': 'text/plain' }],
      [JSON.stringify(sampleEvent(DS)), { accept: 'text/html' }],
      [JSON.stringify(sampleEvent(DS)), { 'content-encoding': 'gzip' }],
    ] as const) {
      const answer = await post(body, headers);
      assert.equal(answer.status, 400, `${body} ${JSON.stringify(headers)}`);
      assert.ok('error' in (events(answer) as object));
    }
  });

  test('401 (unknown key, wrong signature, bearer token)', async () => {
    events(await post('{}', {}, { keyId: 'key_unknown', secret: 'x' }));
    events(await post('{}', {}, { keyId: creds.keyId, secret: 'wrong' }));
    events(await request(server.port, server.ca, { body: '{}', headers: { authorization: 'Bearer abc' } }));
  });

  test('403 from the gateway rules, with and without Authorization', async () => {
    const missing = await request(server.port, server.ca, { method: 'GET', path: '/v1/events' });
    assert.equal(missing.status, 403);
    assert.deepEqual(events(missing), { message: 'Missing Authentication Token' });
    const incomplete = await request(server.port, server.ca, { method: 'POST', path: '/other', body: '{}', headers: { authorization: 'AWS4 x' } });
    assert.equal(incomplete.status, 403);
    events(incomplete);
    assert.equal(incomplete.headers['x-amzn-errortype'], 'IncompleteSignatureException');
  });

  test('404 for another version segment', async () => {
    const answer = await request(server.port, server.ca, { method: 'POST', path: '/v2/events', body: '{}' });
    assert.equal(answer.status, 404);
    events(answer);
  });

  test('the HTTP/1.1 parser\'s bare 400, 413 and 431: no body, no X-Request-Id', async () => {
    const body = JSON.stringify(sampleEvent(DS));
    const framing = await raw(signedHead(body, creds, DS, ['Content-Length: 10', 'Transfer-Encoding: chunked']) + body);
    assert.equal(framing.status, 400);
    events(framing);
    const extension = await raw(`${signedHead(body, creds, DS, ['Transfer-Encoding: chunked'])}${body.length.toString(16)};x=${'a'.repeat(17 * 1024)}`);
    assert.equal(extension.status, 413);
    events(extension);
    const head = await raw(`POST /v1/events HTTP/1.1\r\nHost: localhost\r\nX-Padding: ${'a'.repeat(17 * 1024)}\r\n\r\n`);
    assert.equal(head.status, 431);
    events(head);
  });

  test('408 when the request head does not arrive in time (--headers-timeout 1s)', async () => {
    const answer = await raw('POST /v1/events HTTP/1.1\r\nHost: localhost\r\n');
    assert.equal(answer.status, 408);
    events(answer);
  });

  test('429 over a data set\'s limit: Retry-After and the RateLimit headers', async () => {
    let answer: Answer | undefined;
    for (let i = 0; i < 6 && answer?.status !== 429; i++) answer = await post(JSON.stringify(sampleEvent('contract-tight')), {}, creds, 'contract-tight');
    assert.equal(answer!.status, 429, answer!.text);
    events(answer!);
    assert.ok(answer!.headers['retry-after'] && answer!.headers.ratelimit);
  });

  test('500 while the queue cannot commit; /readyz is then 503', async () => {
    const release = await blockQueueCommits(dataDir);
    try {
      const answer = await post(JSON.stringify(sampleEvent(DS)));
      assert.equal(answer.status, 500, answer.text);
      events(answer);
      const ready = await admin('GET', '/readyz');
      assert.equal(ready.status, 503);
      conforms('/readyz', 'get', ready);
    } finally {
      await release();
    }
    // Recovery needs no restart: the next commit succeeds, and readiness follows it.
    const after = await post(JSON.stringify(sampleEvent(DS)));
    assert.equal(after.status, 200, after.text);
    let ready = await admin('GET', '/readyz');
    for (let i = 0; i < 100 && ready.status !== 200; i++) {
      await new Promise((r) => setTimeout(r, 100));
      ready = await admin('GET', '/readyz');
    }
    assert.equal(ready.status, 200, ready.text);
    conforms('/readyz', 'get', ready);
  });

  test('429 for a client address that keeps failing authentication (last: it sheds this address)', async () => {
    let answer: Answer | undefined;
    for (let i = 0; i < 30 && answer?.status !== 429; i++) answer = await post('{}', {}, { keyId: 'key_unknown', secret: 'x' });
    assert.equal(answer!.status, 429);
    events(answer!);
    assert.equal(answer!.headers.ratelimit, undefined);
  });
});

describe('admin port', () => {
  test('/healthz, /readyz, /metrics', async () => {
    conforms('/healthz', 'get', await admin('GET', '/healthz'));
    const ready = await admin('GET', '/readyz');
    assert.equal(ready.status, 200, ready.text);
    conforms('/readyz', 'get', ready);
    const metrics = await admin('GET', '/metrics');
    assert.equal(metrics.status, 200);
    assert.match(conforms('/metrics', 'get', metrics) as string, /^# HELP /);
  });

  test('/api/stats/{dataSetId}: 200 and 400', async () => {
    const stats = await admin('GET', `/api/stats/${DS}?since=24h`);
    assert.equal(stats.status, 200, stats.text);
    conforms('/api/stats/{dataSetId}', 'get', stats);
    const bad = await admin('GET', `/api/stats/${DS}?since=yesterday-ish`);
    assert.equal(bad.status, 400);
    conforms('/api/stats/{dataSetId}', 'get', bad);
  });

  test('the console API', async () => {
    for (const path of ['/api/overview', '/api/timeseries', '/api/data-sets', '/api/test-events']) {
      const answer = await admin('GET', path);
      assert.equal(answer.status, 200, `${path}: ${answer.text}`);
      conforms(path, 'get', answer);
    }
    const bad = await admin('GET', '/api/timeseries?window=3h');
    assert.equal(bad.status, 400);
    conforms('/api/timeseries', 'get', bad);
    const badFilter = await admin('GET', '/api/test-events?outcome=good');
    assert.equal(badFilter.status, 400);
    conforms('/api/test-events', 'get', badFilter);
    const reset = await admin('DELETE', '/api/test-events');
    assert.equal(reset.status, 200, reset.text);
    conforms('/api/test-events', 'delete', reset);
    const one = await admin('GET', `/api/data-sets/${DS}`);
    assert.equal(one.status, 200, one.text);
    conforms('/api/data-sets/{id}', 'get', one);
    const none = await admin('GET', '/api/data-sets/no-such-set');
    assert.equal(none.status, 404);
    conforms('/api/data-sets/{id}', 'get', none);
  });

  test('/api/session: GET, POST (cookie), DELETE', async () => {
    conforms('/api/session', 'get', await admin('GET', '/api/session', { token: null }));
    const login = await admin('POST', '/api/session', { token: null, body: { token: ADMIN_TOKEN } });
    assert.equal(login.status, 200);
    conforms('/api/session', 'post', login);
    const cookie = String(login.headers['set-cookie']).split(';')[0]!;
    const withCookie = await admin('GET', '/api/overview', { token: null, cookie });
    assert.equal(withCookie.status, 200);
    conforms('/api/session', 'delete', await admin('DELETE', '/api/session', { token: null, cookie }));
  });

  test('421 for a Host that is not ours, 401 without the token', async () => {
    for (const path of ['/healthz', '/readyz', '/metrics', '/api/overview']) {
      const misdirected = await admin('GET', path, { host: 'rebound.example' });
      assert.equal(misdirected.status, 421);
      conforms(path, 'get', misdirected);
    }
    for (const [method, path] of [['get', '/healthz'], ['get', '/readyz'], ['get', '/metrics'], ['get', `/api/stats/${DS}`], ['get', '/api/overview'], ['get', '/api/timeseries'], ['get', '/api/data-sets'], ['get', `/api/data-sets/${DS}`], ['get', '/api/test-events']] as const) {
      const refused = await admin(method.toUpperCase(), path, { token: null });
      assert.equal(refused.status, 401, path);
      conforms(path.startsWith('/api/stats/') ? '/api/stats/{dataSetId}' : path.startsWith('/api/data-sets/') ? '/api/data-sets/{id}' : path, method, refused);
    }
    const wrongLogin = await admin('POST', '/api/session', { token: null, body: { token: 'wrong' } });
    assert.equal(wrongLogin.status, 401);
    conforms('/api/session', 'post', wrongLogin);
  });

  test('429 after too many wrong tokens (last: it throttles this client)', async () => {
    let answer: Answer | undefined;
    for (let i = 0; i < 20 && answer?.status !== 429; i++) answer = await admin('GET', '/healthz', { token: `wrong-${i}` });
    assert.equal(answer!.status, 429);
    conforms('/healthz', 'get', answer!);
  });
});

test('every documented status of the public operation was seen', () => {
  const documented = Object.keys(document.paths['/v1/events']!.post.responses).map((s) => `/v1/events post ${s}`);
  assert.deepEqual(documented.filter((k) => !covered.has(k)), []);
});
