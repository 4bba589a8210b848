/**
 * Black-box rate limits against the real server with low overrides. Requests are started at the
 * beginning of a wall-clock second so that "in one second" is unambiguous.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { signBody } from '@ecapi-ingest/protocol';
import { cliJson, exportQueue, provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import { postSigned, request, sampleEvent, type Credentials } from '../helpers/https-client.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Waits until just after the start of the next wall-clock second. */
const nextSecond = () => sleep(1000 - (Date.now() % 1000) + 5);

describe('rate limits, one process', () => {
  let server: ServerProcess;
  let dataDir: string;
  let creds: Credentials;

  before(async () => {
    dataDir = tempDataDir();
    creds = await provision(dataDir, ['limited', 'neighbour', 'batches']);
    await cliJson(dataDir, ['data-set', 'limits', 'limited', '--rps', '5', '--burst-rps', '10', '--burst-seconds', '2']);
    await cliJson(dataDir, ['data-set', 'limits', 'batches', '--eps', '1000']);
    server = await startServer({ dataDir, args: ['--workers', '1', '--failed-auth-burst', '1000'] });
  });
  after(() => server.stop());

  const send = (ds: string, body = JSON.stringify(sampleEvent(ds))) => postSigned(server.port, server.ca, creds, ds, body);

  test('data-set list --json shows the effective limits', async () => {
    const sets = await cliJson<any[]>(dataDir, ['data-set', 'list']);
    assert.deepEqual(sets.find((s) => s.id === 'limited').limits, { rps: 5, burst_rps: 10, burst_seconds: 2, eps: 100000 });
    assert.deepEqual(sets.find((s) => s.id === 'neighbour').limits, { rps: 1000, burst_rps: 5000, burst_seconds: 60, eps: 100000 });
  });

  test('admission up to the burst, 429 beyond it with Retry-After, recovery, then the sustained limit', async () => {
    await nextSecond();
    // Unauthenticated requests naming the data set never spend its budget.
    for (let i = 0; i < 15; i++) {
      const body = JSON.stringify(sampleEvent('limited'));
      const res = await request(server.port, server.ca, {
        body,
        headers: { 'content-type': 'application/json', 'x-service-key-id': creds.keyId, 'x-service-data-set': 'limited', 'x-service-signature': signBody(body, 'forged') },
      });
      assert.equal(res.status, 401);
      assert.equal(res.headers.ratelimit, undefined, 'no rate-limit headers before authentication');
    }
    const admitted: string[] = [];
    for (let i = 0; i < 10; i++) {
      const event = sampleEvent('limited');
      const res = await send('limited', JSON.stringify(event));
      assert.equal(res.status, 200, `request ${i}`);
      assert.match(res.headers['ratelimit-policy'] as string, /"burst";q=10;w=1/);
      assert.match(res.headers.ratelimit as string, new RegExp(`"burst";r=${9 - i};`));
      admitted.push(event.id as string);
    }
    const refusedEvent = sampleEvent('limited');
    const over = await send('limited', JSON.stringify(refusedEvent));
    assert.equal(over.status, 429);
    assert.deepEqual(over.json(), { error: 'rate limit exceeded: burst of 10 requests per second' });
    const retryAfter = Number(over.headers['retry-after']);
    assert.equal(retryAfter, 1);
    assert.match(over.headers.ratelimit as string, /"burst";r=0;/);

    // Isolation: another data set of the same key is unaffected.
    assert.equal((await send('neighbour')).status, 200);

    // Recovery after Retry-After. The sustained bucket (capacity (10-5)*2 = 10) was emptied by the
    // burst and has refilled about 5 tokens since: a few more pass, then the sustained limit holds.
    await sleep(retryAfter * 1000);
    const statuses: number[] = [];
    let sustained: any;
    for (let i = 0; i < 10; i++) {
      const res = await send('limited');
      statuses.push(res.status);
      if (res.status === 429) sustained = { body: res.json(), retryAfter: res.headers['retry-after'] };
    }
    const passed = statuses.filter((s) => s === 200).length;
    assert.ok(passed >= 4 && passed <= 7, `about 5 admitted after recovery: ${statuses}`);
    assert.deepEqual(sustained.body, { error: 'rate limit exceeded: 5 requests per second sustained' });
    assert.equal(sustained.retryAfter, '1');

    const queued = new Set((await exportQueue(dataDir, 'production', ['--data-set', 'limited'])).map((r) => r.event.id));
    for (const id of admitted) assert.ok(queued.has(id));
    assert.ok(!queued.has(refusedEvent.id), 'nothing of a 429 request is queued');
  });

  test('the event limit applies across batches', async () => {
    const batch = (n: number) => JSON.stringify({ events: Array.from({ length: n }, () => sampleEvent('batches')) });
    assert.equal((await send('batches', batch(1000))).status, 200);
    const res = await send('batches', batch(600));
    assert.equal(res.status, 429);
    assert.deepEqual(res.json(), { error: 'rate limit exceeded: 1000 events per second' });
    assert.ok(Number(res.headers['retry-after']) >= 1);
  });
});

describe('pre-authentication shedding', () => {
  let server: ServerProcess;
  let creds: Credentials;
  before(async () => {
    const dataDir = tempDataDir();
    creds = await provision(dataDir, ['shed']);
    server = await startServer({ dataDir, args: ['--workers', '1', '--failed-auth-burst', '5', '--failed-auth-rps', '2'] });
  });
  after(() => server.stop());

  test('an address that keeps failing authentication gets 429 before any work, then recovers', async () => {
    const body = JSON.stringify(sampleEvent('shed'));
    for (let i = 0; i < 5; i++) {
      const res = await postSigned(server.port, server.ca, { keyId: creds.keyId, secret: 'guess' }, 'shed', body);
      assert.equal(res.status, 401);
    }
    const shed = await postSigned(server.port, server.ca, creds, 'shed', body);
    assert.equal(shed.status, 429, 'even a valid request from a shed address waits');
    assert.deepEqual(shed.json(), { error: 'rate limit exceeded: too many failed authentication attempts from this address' });
    const wait = Number(shed.headers['retry-after']);
    assert.equal(wait, 1);
    await sleep(wait * 1000);
    assert.equal((await postSigned(server.port, server.ca, creds, 'shed', body)).status, 200);
  });
});

describe('rate limits, serve --workers 2', () => {
  let server: ServerProcess;
  let creds: Credentials;
  before(async () => {
    const dataDir = tempDataDir();
    creds = await provision(dataDir, ['node-wide']);
    // Sustained 20/s with a 20-request bucket ((40 - 20) * 1 s) and at most 40 in any second.
    await cliJson(dataDir, ['data-set', 'limits', 'node-wide', '--rps', '20', '--burst-rps', '40', '--burst-seconds', '1']);
    server = await startServer({ dataDir, args: ['--workers', '2'] });
  });
  after(() => server.stop());

  test('the limit holds for the node as a whole: admitted rate within 5% of the limit', async () => {
    // Offer 60 req/s over several connections (spread across both workers) for 4 seconds.
    await nextSecond();
    const started = Date.now();
    const seconds = 4;
    let admitted = 0;
    let refused = 0;
    await Promise.all(
      Array.from({ length: 6 }, async (_, sender) => {
        for (let i = 0; i < seconds * 10; i++) {
          const due = started + i * 100 + sender * 16;
          if (due > Date.now()) await sleep(due - Date.now());
          const res = await postSigned(server.port, server.ca, creds, 'node-wide', JSON.stringify(sampleEvent('node-wide')));
          if (res.status === 200) admitted++;
          else if (res.status === 429) refused++;
          else assert.fail(`unexpected ${res.status}`);
        }
      }),
    );
    const elapsed = (Date.now() - started) / 1000;
    // The bucket's 20 plus 20/s: the most the limits allow in `elapsed` seconds (the first second's
    // 40 is also exactly the per-second cap).
    const allowed = 20 + 20 * elapsed;
    assert.ok(refused > 0, 'the offered load exceeded the limit');
    assert.ok(admitted <= allowed * 1.05, `admitted ${admitted} of at most ${allowed.toFixed(1)}`);
    assert.ok(admitted >= allowed * 0.95 - 1, `admitted ${admitted}, expected about ${allowed.toFixed(1)}`);
  });
});
