/**
 * Black-box: `ecapi-ingest send` against the real server: --demo, env-var credentials, NDJSON and
 * JSON input, --hash, --rejects, --dry-run, the summary (--json) and exit codes; the honest
 * failures (one request-level error for 401/403/TLS with its fix, malformed lines by line number,
 * progress and summary counts that agree, a progress bar that fits the terminal).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { main } from '../../src/cli/main.js';
import { progressLine, sameStoreOptions } from '../../src/cli/send-command.js';
import { exportQueue, profileArgs, provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import { waitFor } from '../helpers/fault-tools.js';

let dataDir: string;
let server: ServerProcess;
let creds: { keyId: string; secret: string };
let work: string;

before(async () => {
  dataDir = tempDataDir();
  server = await startServer({ dataDir, demo: true, args: ['--workers', '1'] });
  creds = await provision(dataDir, ['cli']);
  work = mkdtempSync(join(tmpdir(), 'ecapi-send-'));
});
after(async () => {
  await server.stop();
});

async function run(args: string[], env: Record<string, string> = {}, options: { dataDir?: string; tty?: { columns: number } } = {}) {
  let stdout = '';
  let stderr = '';
  const dir = options.dataDir ?? dataDir;
  const code = await main(['--data-dir', dir, ...(await profileArgs(dataDir)), ...args], {
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t), ...(options.tty ? { isTTY: true, columns: options.tty.columns } : {}) },
    env: { ...env },
  });
  return { code, stdout, stderr };
}

const envCreds = () => ({ ECAPI_URL: `https://127.0.0.1:${server.port}`, ECAPI_KEY_ID: creds.keyId, ECAPI_SECRET: creds.secret, ECAPI_DATA_SET: 'cli' });
const ts = () => Math.floor(Date.now() / 1000) - 5;

test('send --demo sends a signed sample event with the demo key and prints its id for the next README step', async () => {
  const r = await run(['--json', 'send', '--demo', '--url', `https://127.0.0.1:${server.port}`]);
  assert.equal(r.code, 0, r.stderr);
  const summary = JSON.parse(r.stdout);
  assert.deepEqual([summary.ok, summary.total, summary.accepted, summary.data_set], [true, 1, 1, 'demo']);
  const queued = await exportQueue(dataDir, 'production', ['--data-set', 'demo']);
  assert.equal(queued.length, 1);
  assert.deepEqual(queued[0]!.event.user_data.email_address, ['b4c9a289323b21a01c3e940f150eb9b8c542587f1abfd8f0e1cc1ffc5e475514']);
  assert.equal(summary.event_id, queued[0]!.event.id);

  const text = await run(['send', '--demo', '--no-progress', '--url', `https://127.0.0.1:${server.port}`]);
  assert.equal(text.code, 0, text.stderr);
  const m = /^1 event in [\d.]+ s: 1 accepted, 0 rejected, 0 undeliverable; 1 request, 0 retries\nevent id: (\S+)\nSee it in the merged view in a moment: npx ecapi-ingest(.*) events get demo (\S+)\n$/.exec(text.stdout);
  assert.ok(m, text.stdout);
  assert.equal(m[1], m[3]);
  // The look-up reads the store this send read: its --data-dir (not the default), never a database URL's value.
  assert.ok(m[2]!.startsWith(` --data-dir ${dataDir}`), m[2]);
  if ((await profileArgs(dataDir)).length > 0) assert.ok(m[2]!.endsWith(' --database-url <the same URL>'), m[2]);
  const ids = (await exportQueue(dataDir, 'production', ['--data-set', 'demo'])).map((q) => q.event.id);
  assert.ok(ids.includes(m[1]!), 'the printed id is the queued event');
});

test('NDJSON with env credentials and --hash: accepted events queued hashed, rejects written with reasons, exit 1', async () => {
  const file = join(work, 'events.ndjson');
  const rejects = join(work, 'rejects.ndjson');
  writeFileSync(file, [
    JSON.stringify({ id: 'n-0', timestamp: ts(), event_type: 'purchase', value: 1, currency_code: 'USD', user_data: { email_address: [' User@example.com '] } }),
    '{not json',
    '',
    JSON.stringify({ id: 'n-1', timestamp: ts(), event_type: 'purchase', value: 1, currency_code: 'ABC' }),
    JSON.stringify({ id: 'n-2', timestamp: ts(), event_type: 'lead' }),
    JSON.stringify({ timestamp: ts(), event_type: 'page_view', user_data: { phone_numbers: ['+1 212-555-0000'] } }),
  ].join('\n'));
  const r = await run(['--json', 'send', '--hash', '--rejects', rejects, file], envCreds());
  assert.equal(r.code, 1, r.stderr);
  const summary = JSON.parse(r.stdout);
  assert.deepEqual([summary.total, summary.accepted, summary.rejected, summary.undeliverable, summary.requests], [5, 2, 3, 0, 1]);
  assert.match(r.stderr, /error: 3 events rejected/);
  // On stderr by line number, --json or not: the line that is not JSON and the rejected events.
  assert.match(r.stderr, /^  invalid JSON on line 2: /m);
  assert.match(r.stderr, /^  line 4 \(id n-1\): rejected: invalid field currency_code/m);
  assert.match(r.stderr, /^  line 5 \(id n-2\): rejected: schema validation failed: event_type/m);
  const lines = readFileSync(rejects, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  assert.deepEqual(lines.map((l) => [l.line, l.status, l.id, l.code]), [[2, 'rejected', null, 'INVALID_JSON'], [4, 'rejected', 'n-1', 'INVALID_FIELD'], [5, 'rejected', 'n-2', 'SCHEMA']]);
  assert.match(lines[0].error, /^invalid JSON on line 2/);
  assert.match(lines[1].error, /^invalid field currency_code/);
  assert.equal(lines[1].http_status, 207);
  assert.match(lines[2].error, /^schema validation failed: event_type/);
  assert.equal(lines[2].http_status, null, 'caught before sending');
  const queued = await exportQueue(dataDir, 'production', ['--data-set', 'cli']);
  const byId = new Map(queued.map((q) => [q.event.id, q.event]));
  assert.deepEqual(byId.get('n-0')!.user_data.email_address, ['b4c9a289323b21a01c3e940f150eb9b8c542587f1abfd8f0e1cc1ffc5e475514']);
  assert.ok(queued.some((q) => q.event.user_data?.phone_numbers?.[0] === '7c8d08bf90ca322bcac37f99ba14e980e4b1f5ba919f7e16a030af9070ba125e' && /^[0-9a-f-]{36}$/.test(q.event.id)));
});

test('a JSON array file with options instead of env; plain summary and periodic progress on stderr', async () => {
  const file = join(work, 'events.json');
  writeFileSync(file, JSON.stringify(Array.from({ length: 2500 }, (_, i) => ({ id: `j-${i}`, timestamp: ts(), event_type: 'page_view' }))));
  const r = await run(['send', '--url', `https://127.0.0.1:${server.port}`, '--key-id', creds.keyId, '--secret', creds.secret, '--data-set', 'cli', file]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^2,500 events in [\d.]+ s: 2,500 accepted, 0 rejected, 0 undeliverable; 3 requests, 0 retries\n$/);
  assert.match(r.stderr, /visible to other users \(ps\); prefer the ECAPI_SECRET/);
  assert.match(r.stderr, /send: 2,500\/2,500 done, 2,500 accepted, 0 rejected/);
});

test('--dry-run validates without sending or credentials', async () => {
  const file = join(work, 'dry.ndjson');
  writeFileSync(file, [JSON.stringify({ timestamp: ts(), event_type: 'purchase' }), JSON.stringify({ timestamp: ts(), event_type: 'purchase', value: 3 })].join('\n'));
  const before = (await exportQueue(dataDir)).length;
  const r = await run(['--json', 'send', '--dry-run', '--data-set', 'cli', file]);
  assert.equal(r.code, 1);
  const summary = JSON.parse(r.stdout);
  assert.deepEqual([summary.dry_run, summary.total, summary.accepted, summary.rejected, summary.requests], [true, 2, 1, 1, 1]);
  assert.equal((await exportQueue(dataDir)).length, before);
  const ok = await run(['send', '--dry-run', '--data-set', 'cli', file.replace('dry', 'events')]);
  assert.equal(ok.code, 1, 'the events file above has an invalid line');

  // Without --data-set: the one data set the events name; none or several is a usage error saying so.
  const named = join(work, 'dry-named.ndjson');
  writeFileSync(named, [JSON.stringify({ data_set_id: 'cli', timestamp: ts(), event_type: 'purchase', value: 1, currency_code: 'USD' }), JSON.stringify({ data_set_id: 'cli', timestamp: ts(), event_type: 'page_view' })].join('\n'));
  const fromEvents = await run(['--json', 'send', '--dry-run', named]);
  assert.equal(fromEvents.code, 0, fromEvents.stderr);
  assert.deepEqual([JSON.parse(fromEvents.stdout).data_set, JSON.parse(fromEvents.stdout).accepted], ['cli', 2]);
  const none = await run(['send', '--dry-run', file]);
  assert.equal(none.code, 2);
  assert.match(none.stderr, /^error: missing data set: set ECAPI_DATA_SET or pass --data-set \(the events name none\)$/m);
  const two = join(work, 'dry-two.ndjson');
  writeFileSync(two, [JSON.stringify({ data_set_id: 'a', timestamp: ts(), event_type: 'page_view' }), JSON.stringify({ data_set_id: 'b', timestamp: ts(), event_type: 'page_view' })].join('\n'));
  assert.match((await run(['send', '--dry-run', two])).stderr, /\(the events name 2 different ones\)/);
});

test('a wrong secret is one authentication error with its fix (exit 4), not N rejected events; a refused connection is one error naming the URL (exit 4)', async () => {
  const file = join(work, 'many.ndjson');
  writeFileSync(file, Array.from({ length: 2500 }, () => JSON.stringify({ timestamp: ts(), event_type: 'page_view' })).join('\n'));
  const wrong = await run(['send', file], { ...envCreds(), ECAPI_SECRET: 'sk_wrong' });
  assert.equal(wrong.code, 4, wrong.stderr);
  assert.doesNotMatch(wrong.stdout, /sent/);
  // Requests already in flight (--concurrency 4) may get their 401 too; nothing after them is sent.
  assert.match(wrong.stdout, /^2,500 events in [\d.]+ s: 0 accepted, 0 rejected, 2,500 undeliverable; [1-4] requests?, 0 retries\n$/);
  const errors = wrong.stderr.split('\n').filter((l) => /error|rejected|undeliverable:/.test(l) && !l.startsWith('send: '));
  assert.equal(errors.length, 1, wrong.stderr);
  assert.match(errors[0]!, /^error: authentication failed: 401 signature does not match: .*Check ECAPI_KEY_ID and ECAPI_SECRET \(--key-id, --secret\)/);
  const json = await run(['--json', 'send', file], { ...envCreds(), ECAPI_SECRET: 'sk_wrong' });
  const summary = JSON.parse(json.stdout);
  assert.deepEqual([summary.rejected, summary.undeliverable, summary.retries, summary.failure.code, summary.failure.http_status], [0, 2500, 0, 'AUTHENTICATION', 401]);
  assert.ok(summary.requests <= 4, `${summary.requests} requests`);

  const one = join(work, 'one.ndjson');
  writeFileSync(one, JSON.stringify({ timestamp: ts(), event_type: 'page_view' }) + '\n');
  // Nothing listens there: one request-level failure at once (no retries), naming the URL and --url.
  const closed = await run(['--json', 'send', '--max-retries', '1', one], { ...envCreds(), ECAPI_URL: 'https://127.0.0.1:1' });
  assert.equal(closed.code, 4, closed.stderr);
  const closedSummary = JSON.parse(closed.stdout);
  assert.deepEqual([closedSummary.undeliverable, closedSummary.retries, closedSummary.requests, closedSummary.failure.code], [1, 0, 1, 'CONNECTION_REFUSED']);
  assert.match(closed.stderr, /^error: connection refused at https:\/\/127\.0\.0\.1:1\/v1\/events: no server listens there\. Check ECAPI_URL \(--url\)/m);
  assert.doesNotMatch(closed.stderr, /resend them later/);
});

test('send refuses a plain http:// URL, or one ending in /v1/events, before reading or sending anything (exit 2)', async () => {
  const one = join(work, 'one-http.ndjson');
  writeFileSync(one, JSON.stringify({ timestamp: ts(), event_type: 'page_view' }) + '\n');
  const plain = await run(['send', '--url', `http://127.0.0.1:${server.port}`, one], envCreds());
  assert.equal(plain.code, 2, plain.stderr);
  assert.equal(plain.stderr, `error: --url http://127.0.0.1:${server.port} is plain http://: ecapi-ingest answers HTTPS (TLS 1.3) only; use https://127.0.0.1:${server.port}\n`);
  const fromEnv = await run(['send', one], { ...envCreds(), ECAPI_URL: `https://127.0.0.1:${server.port}/v1/events` });
  assert.equal(fromEnv.code, 2, fromEnv.stderr);
  assert.equal(fromEnv.stderr, `error: ECAPI_URL https://127.0.0.1:${server.port}/v1/events ends in /v1/events, which the client adds itself: use https://127.0.0.1:${server.port}\n`);
});

test('send refuses a key id or data set with a trailing newline, naming the option and never echoing the value (exit 2)', async () => {
  const one = join(work, 'one-header.ndjson');
  writeFileSync(one, JSON.stringify({ timestamp: ts(), event_type: 'page_view' }) + '\n');
  const key = await run(['send', one], { ...envCreds(), ECAPI_KEY_ID: `${envCreds().ECAPI_KEY_ID}\n` });
  assert.equal(key.code, 2, key.stderr);
  assert.equal(key.stderr, 'error: ECAPI_KEY_ID must be printable ASCII without leading or trailing whitespace (it is sent as a header): check for a trailing newline\n');
  const dataSet = await run(['send', '--data-set', 'cli ', one], envCreds());
  assert.equal(dataSet.code, 2, dataSet.stderr);
  assert.match(dataSet.stderr, /^error: --data-set must be printable ASCII/);
});

test('send --demo where no server listens: connection refused at the URL, with the --url hint, at once (exit 4)', async () => {
  const net = await import('node:net');
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const port = (probe.address() as import('node:net').AddressInfo).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  const r = await run(['send', '--demo', '--no-progress', '--url', `https://127.0.0.1:${port}`]);
  assert.equal(r.code, 4, r.stderr);
  assert.match(r.stdout, /^1 event in [\d.]+ s: 0 accepted, 0 rejected, 1 undeliverable; 1 request, 0 retries\n$/);
  assert.equal(r.stderr,
    `error: connection refused at https://127.0.0.1:${port}/v1/events: no server listens there. send --demo sends to the default port of a local production server; ` +
    'for a server on another port pass --url https://127.0.0.1:<port> (serve prints its port at start), or start one with npm start. ' +
    'Nothing more was sent: 1 event not delivered; resend it after the fix, its id is kept\n');
});

test('run with another data dir, an untrusted certificate is one TLS error naming --ca, --data-dir and where the CA was looked for (exit 4)', async () => {
  const elsewhere = mkdtempSync(join(tmpdir(), 'ecapi-send-elsewhere-'));
  const file = join(work, 'tls.ndjson');
  writeFileSync(file, Array.from({ length: 50 }, () => JSON.stringify({ timestamp: ts(), event_type: 'page_view' })).join('\n'));
  const r = await run(['send', file], envCreds(), { dataDir: elsewhere });
  assert.equal(r.code, 4, r.stderr);
  const errors = r.stderr.split('\n').filter((l) => l.startsWith('error') || /undeliverable:/.test(l));
  assert.equal(errors.length, 1, r.stderr);
  assert.match(errors[0]!, /^error: TLS: the server's certificate is not trusted \(DEPTH_ZERO_SELF_SIGNED_CERT\)/);
  assert.ok(errors[0]!.includes(join(elsewhere, 'tls', 'localhost-cert.pem')), 'names where the CA was looked for');
  assert.match(errors[0]!, /--ca <file>.*--data-dir/);
  assert.doesNotMatch(r.stdout, /sent/);
});

test('a grant missing for the data set is one authorization error (exit 4)', async () => {
  const file = join(work, 'one.ndjson');
  writeFileSync(file, JSON.stringify({ timestamp: ts(), event_type: 'page_view' }) + '\n');
  const r = await run(['--json', 'send', file], { ...envCreds(), ECAPI_DATA_SET: 'demo' });
  assert.equal(r.code, 4, r.stderr);
  assert.equal(JSON.parse(r.stdout).failure.code, 'AUTHORIZATION');
  assert.match(r.stderr, /^error: not authorized: 401 principal not authorized for data_set_id demo\. The key has no grant for data set "demo"/m);
});

test('progress and summary agree when lines are not JSON; off a terminal, plain lines', async () => {
  const file = join(work, 'mixed.ndjson');
  writeFileSync(file, [
    JSON.stringify({ timestamp: ts(), event_type: 'page_view' }),
    '{"broken":',
    JSON.stringify({ timestamp: ts(), event_type: 'page_view' }),
    'nope',
    JSON.stringify({ timestamp: ts(), event_type: 'page_view' }),
  ].join('\n'));
  const r = await run(['send', file], envCreds());
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /^  invalid JSON on line 2: /m);
  assert.match(r.stderr, /^  invalid JSON on line 4: /m);
  assert.match(r.stdout, /^5 events in [\d.]+ s: 3 accepted, 2 rejected, 0 undeliverable/);
  const progress = r.stderr.split('\n').filter((l) => l.startsWith('send: '));
  assert.ok(progress.length >= 1);
  assert.match(progress.at(-1)!, /^send: 5\/5 done, 3 accepted, 2 rejected, /);
  assert.doesNotMatch(r.stderr, /\r|\x1b/, 'no terminal control off a terminal');
});

test('on a terminal the progress bar redraws in place and fits the width', async () => {
  const file = join(work, 'tty.ndjson');
  writeFileSync(file, Array.from({ length: 3000 }, () => JSON.stringify({ timestamp: ts(), event_type: 'page_view' })).join('\n'));
  for (const columns of [80, 40]) {
    const r = await run(['send', '--concurrency', '1', file], envCreds(), { tty: { columns } });
    assert.equal(r.code, 0, r.stderr);
    const draws = r.stderr.split('\r').slice(1).map((d) => d.replace(/\n$/, ''));
    assert.ok(draws.length >= 1);
    for (const d of draws) {
      assert.ok(d.endsWith('\x1b[K'), JSON.stringify(d));
      const visible = d.slice(0, -3);
      assert.ok(visible.length <= columns - 1, `${visible.length} > ${columns - 1}: ${visible}`);
      assert.ok(!visible.includes('\x1b'), 'one erase per draw, at its end');
    }
    assert.match(draws.at(-1)!, /^\[█+\] 100% 3,000\/3,000 done/);
  }
});

test('Ctrl-C interrupts a send: what was accepted stays accepted, the rest goes to --rejects as ABORTED, exit 130', async () => {
  // One request per second for this data set: the send's three requests take at least two seconds.
  const slow = await provision(dataDir, ['slow']);
  assert.equal((await run(['data-set', 'limits', 'slow', '--rps', '1', '--burst-rps', '1', '--burst-seconds', '1'])).code, 0);
  const slowEnv = { ECAPI_URL: `https://127.0.0.1:${server.port}`, ECAPI_KEY_ID: slow.keyId, ECAPI_SECRET: slow.secret, ECAPI_DATA_SET: 'slow' };
  const one = join(work, 'one-slow.ndjson');
  writeFileSync(one, JSON.stringify({ timestamp: ts(), event_type: 'page_view' }) + '\n');
  // The server has the limits once a second request in a row is told to wait (429, retried by send).
  await waitFor('the data set\'s limits in force', async () => {
    await run(['send', '--no-progress', '--max-retries', '0', one], slowEnv);
    return (JSON.parse((await run(['send', '--no-progress', '--json', one], slowEnv)).stdout) as { retries: number }).retries >= 1;
  }, 20_000, 100);
  const file = join(work, 'interrupted.ndjson');
  const rejects = join(work, 'interrupted-rejects.ndjson');
  const ids = Array.from({ length: 3000 }, (_, i) => `int-${i}-${Date.now()}`);
  writeFileSync(file, ids.map((id) => JSON.stringify({ id, timestamp: ts(), event_type: 'page_view' })).join('\n'));
  let stderr = '';
  let stdout = '';
  const sending = main(['--data-dir', dataDir, ...(await profileArgs(dataDir)), 'send', '--concurrency', '1', '--rejects', rejects, file], {
    stdout: { write: (t: string) => (stdout += t) },
    stderr: Object.assign({ write: (t: string) => (stderr += t) }, { isTTY: true, columns: 120 }),
    env: slowEnv,
  });
  // Once the first request is accepted (the progress bar redraws every 100 ms), the signal.
  await waitFor('the first request accepted', async () => /[1-9][\d,]* accepted/.test(stderr), 20_000, 20);
  process.emit('SIGINT');
  const code = await sending;
  assert.equal(code, 130, stderr);
  const summary = /^3,000 events in [\d.]+ s: ([\d,]+) accepted, 0 rejected, ([\d,]+) undeliverable/m.exec(stdout);
  assert.ok(summary, stdout);
  const [accepted, undeliverable] = [summary[1], summary[2]].map((n) => Number(n!.replace(/,/g, '')));
  assert.ok(accepted! >= 1000 && undeliverable! >= 1000 && accepted! + undeliverable! === 3000, stdout);
  assert.match(stderr, new RegExp(`^interrupted: ${undeliverable!.toLocaleString('en-US')} events not delivered \\(see .*interrupted-rejects\\.ndjson\\); resend them, their ids are kept`, 'm'));
  const written = readFileSync(rejects, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { id?: string; status: string; code: string });
  assert.equal(written.length, undeliverable);
  assert.ok(written.every((w) => w.status === 'undeliverable' && w.code === 'ABORTED'), JSON.stringify(written[0]));
  // What was answered 200 is in the queue.
  const queued = new Set((await exportQueue(dataDir)).map((r) => r.event.id as string));
  const notDelivered = new Set(written.map((w) => w.id));
  assert.ok(ids.filter((id) => !notDelivered.has(id)).every((id) => queued.has(id)), 'every accepted event is queued');
  assert.equal(process.listenerCount('SIGINT'), 0, 'the send let go of SIGINT');
});

test('progressLine: a bar and as many numbers as fit; plain text off a terminal', () => {
  const p = { total: 123_456, done: 61_728, accepted: 61_000, rejected: 700, undeliverable: 28, requests: 70, retries: 3, elapsedMs: 4000 };
  for (const columns of [20, 40, 80, 120, 200]) {
    const line = progressLine(p, { bar: true, columns });
    assert.ok(line.length <= columns - 1, `${columns}: ${line}`);
    assert.match(line, /^\[[█░]*\]/);
  }
  assert.match(progressLine(p, { bar: true, columns: 200 }), / 50% 61,728\/123,456 done, 61,000 accepted, 700 rejected, 28 undeliverable, 3 retries, 15,432 events\/s, ETA 0:04$/);
  // 80 columns: the numbers that would squeeze the bar under 10 cells are left out, the line is 79 long.
  assert.equal(progressLine(p, { bar: true, columns: 80 }), `[${'█'.repeat(11)}${'░'.repeat(10)}]  50% 61,728/123,456 done, 61,000 accepted, 700 rejected`);
  assert.equal(progressLine(p, { bar: false }), 'send: 61,728/123,456 done, 61,000 accepted, 700 rejected, 28 undeliverable, 3 retries, 15,432 events/s, ETA 0:04');
});

test('missing credentials or input: one error line, non-zero exit', async () => {
  const r = await run(['send', join(work, 'one.ndjson')], { ECAPI_DATA_SET: 'cli' });
  assert.equal(r.code, 2, 'a usage error, as docs/guides/sender.md says');
  assert.match(r.stderr, /^error: missing ECAPI_URL \(--url\), ECAPI_KEY_ID \(--key-id\), ECAPI_SECRET \(--secret\)\n$/);
  const noInput = await run(['send'], envCreds());
  assert.equal(noInput.code, 2);
  assert.match(noInput.stderr, /no input/);
});

test('the pasted look-up names the options that differ from the defaults and did not come from the environment; never a database URL', () => {
  const defaults = { env: 'production', dataDir: resolve('data') };
  assert.equal(sameStoreOptions(defaults, {}), '');
  assert.equal(sameStoreOptions({ ...defaults, env: 'test' }, {}), ' --env test');
  assert.equal(sameStoreOptions({ ...defaults, env: 'test' }, { ECAPI_ENV: 'test' }), '', 'ECAPI_ENV holds in the same shell');
  assert.equal(sameStoreOptions({ ...defaults, dataDir: '/srv/ecapi data' }, {}), " --data-dir '/srv/ecapi data'");
  assert.equal(sameStoreOptions({ ...defaults, dataDir: '/srv/x' }, { ECAPI_DATA_DIR: '/srv/x' }), '');
  const url = 'postgres://u:pw@db/ecapi';
  assert.equal(sameStoreOptions({ ...defaults, databaseUrl: url }, {}), ' --database-url <the same URL>');
  assert.equal(sameStoreOptions({ ...defaults, databaseUrl: url }, { ECAPI_DATABASE_URL: url }), '');
});
