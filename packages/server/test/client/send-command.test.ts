/**
 * Black-box: `ecapi-ingest send` against the real server: --demo, env-var credentials, NDJSON and
 * JSON input, --hash, --rejects, --dry-run, the summary (--json) and exit codes.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from '../../src/cli/main.js';
import { exportQueue, profileArgs, provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';

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

async function run(args: string[], env: Record<string, string> = {}) {
  let stdout = '';
  let stderr = '';
  const code = await main(['--data-dir', dataDir, ...(await profileArgs(dataDir)), ...args], {
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t) },
    env: { ...env },
  });
  return { code, stdout, stderr };
}

const envCreds = () => ({ ECAPI_URL: `https://127.0.0.1:${server.port}`, ECAPI_KEY_ID: creds.keyId, ECAPI_SECRET: creds.secret, ECAPI_DATA_SET: 'cli' });
const ts = () => Math.floor(Date.now() / 1000) - 5;

test('send --demo sends a signed sample event with the demo key from the control plane', async () => {
  const r = await run(['--json', 'send', '--demo', '--url', `https://127.0.0.1:${server.port}`]);
  assert.equal(r.code, 0, r.stderr);
  const summary = JSON.parse(r.stdout);
  assert.deepEqual([summary.ok, summary.total, summary.accepted, summary.data_set], [true, 1, 1, 'demo']);
  const queued = await exportQueue(dataDir, 'production', ['--data-set', 'demo']);
  assert.equal(queued.length, 1);
  assert.deepEqual(queued[0]!.event.user_data.email_address, ['b4c9a289323b21a01c3e940f150eb9b8c542587f1abfd8f0e1cc1ffc5e475514']);
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
  const lines = readFileSync(rejects, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  assert.deepEqual(lines.map((l) => [l.line, l.status, l.id]), [[2, 'rejected', null], [4, 'rejected', 'n-1'], [5, 'rejected', 'n-2']]);
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
  assert.match(r.stdout, /^sent 2,500 events in [\d.]+ s \([\d,]+ events\/s\): 2,500 accepted, 0 rejected, 0 undeliverable; 3 requests, 0 retries\n$/);
  assert.match(r.stderr, /visible to other users \(ps\); prefer the ECAPI_SECRET/);
  assert.match(r.stderr, /send: 2,500\/2,500 sent, 2,500 accepted, 0 rejected/);
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
});

test('a wrong secret is rejected (exit 1); an unreachable server is undeliverable (exit 3)', async () => {
  const file = join(work, 'one.ndjson');
  writeFileSync(file, JSON.stringify({ timestamp: ts(), event_type: 'page_view' }) + '\n');
  const wrong = await run(['--json', 'send', file], { ...envCreds(), ECAPI_SECRET: 'sk_wrong' });
  assert.equal(wrong.code, 1);
  assert.deepEqual([JSON.parse(wrong.stdout).rejected, JSON.parse(wrong.stdout).retries], [1, 0]);
  const closed = await run(['--json', 'send', '--max-retries', '1', file], { ...envCreds(), ECAPI_URL: 'https://127.0.0.1:1' });
  assert.equal(closed.code, 3, closed.stderr);
  assert.deepEqual([JSON.parse(closed.stdout).undeliverable, JSON.parse(closed.stdout).retries], [1, 1]);
  assert.match(closed.stderr, /error: 1 events undeliverable/);
});

test('missing credentials or input: one error line, non-zero exit', async () => {
  const r = await run(['send', join(work, 'one.ndjson')], { ECAPI_DATA_SET: 'cli' });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /^error: missing ECAPI_URL \(--url\), ECAPI_KEY_ID \(--key-id\), ECAPI_SECRET \(--secret\)\n$/);
  const noInput = await run(['send'], envCreds());
  assert.equal(noInput.code, 1);
  assert.match(noInput.stderr, /no input/);
});
