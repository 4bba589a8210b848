/**
 * Issue 16, point 7: sender-controlled names and values never reach what is stored, served to
 * operators, logged or used as a metric label. The sender's own response keeps the exact message.
 *
 * Black-box against the real server: events whose unknown field names, enum values and `properties`
 * keys are email addresses and names; then the console API (/api/stats, /api/data-sets/<id>,
 * /api/overview), /metrics, the log and the ingest-stats files are searched for them.
 * The stored-form function itself is checked for its shapes and idempotence (so rows stored before
 * the masking existed are served masked: `reasonGroupOf` re-groups on read).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cliJson, provision, startServer, tempDataDir, TEST_PROFILE } from '../helpers/server-process.js';
import { postSigned, sampleEvent } from '../helpers/https-client.js';
import { storedPathLabelOf, storedReasonOf } from '../../src/validation/stored-reason.js';
import { reasonGroupOf } from '../../src/analytics/reason-groups.js';
import { figuresOf } from '../../src/analytics/stats-document.js';

const SECRETS = ['mary@example.com', 'marysmith1980', 'john.doe@example.org', 'bob@example.net', 'alice-private-note'];

test('identifiers in rejected field names and values: exact in the response, masked everywhere operators look', { timeout: 60_000 }, async () => {
  const dataDir = tempDataDir('ecapi-stored-msg-');
  const creds = await provision(dataDir, ['strict', 'lenient']);
  await cliJson(dataDir, ['data-set', 'policy', 'strict', '--pii-scan', 'reject']);
  const server = await startServer({ dataDir, args: ['--workers', '1', '--no-worker'] });
  try {
    const strictEvents = [
      sampleEvent('strict', { user_data: { 'mary@example.com': 1 } }),
      sampleEvent('strict', { user_data: { marysmith1980: 'x' } }),
      sampleEvent('strict', { event_type: 'john.doe@example.org' }),
      sampleEvent('strict', { properties: { 'bob@example.net': 'write to bob@example.net' } }),
      sampleEvent('strict', { ext: { 'alice-private-note': { x: 'alice-private-note@example.com' } } }),
      sampleEvent('strict'),
    ];
    let res = { status: 0 } as Awaited<ReturnType<typeof postSigned>>;
    // The credential cache picks up the policy within --control-poll (200 ms): retry until it applies.
    for (let attempt = 0; attempt < 50; attempt++) {
      res = await postSigned(server.port, server.ca, creds, 'strict', JSON.stringify({ events: strictEvents }));
      if (res.status === 207 && (res.json() as { rejected: number }).rejected === 5) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(res.status, 207, res.text);
    const answer = res.json() as { errors: { index: number; error: string }[] };
    // The sender gets the exact messages: its own data.
    assert.deepEqual(answer.errors.map((e) => e.error), [
      'schema validation failed: unknown field user_data["mary@example.com"]',
      'schema validation failed: unknown field user_data.marysmith1980',
      answer.errors[2]!.error,
      'invalid field properties["bob@example.net"]: contains a plaintext email address; hash identifiers into user_data instead',
      'invalid field ext["alice-private-note"].x: contains a plaintext email address; hash identifiers into user_data instead',
    ]);
    assert.match(answer.errors[2]!.error, /^schema validation failed: event_type must be .*, got "john\.doe@example\.org"$/);

    // Redaction (policy redact): the metric label is the known prefix, never the sender's key.
    const lenient = await postSigned(server.port, server.ca, creds, 'lenient', JSON.stringify(sampleEvent('lenient', {
      properties: { 'bob@example.net': 'mail bob@example.net', page_url: 'https://shop.example/?e=mary@example.com' },
    })));
    assert.equal(lenient.status, 200, lenient.text);

    const admin = `http://127.0.0.1:${server.adminPort}`;
    // Ingest stats are flushed about once a second.
    let stats = '';
    for (let attempt = 0; attempt < 100; attempt++) {
      stats = await (await fetch(`${admin}/api/stats/strict?since=1h`)).text();
      if ((JSON.parse(stats) as { totals: { ingest: { rejected: number } } }).totals.ingest.rejected === 5) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const rejections = (JSON.parse(stats) as { totals: { ingest: { rejections: Record<string, number> } } }).totals.ingest.rejections;
    assert.deepEqual(Object.keys(rejections).sort(), [
      'invalid field ext.*: contains a plaintext email address; hash identifiers into user_data instead',
      'invalid field properties.*: contains a plaintext email address; hash identifiers into user_data instead',
      'schema validation failed: unknown field user_data.*',
      storedReasonOf(answer.errors[2]!.error),
    ].sort());
    assert.equal(rejections['schema validation failed: unknown field user_data.*'], 2);
    assert.match(storedReasonOf(answer.errors[2]!.error), /, got <value>$/);

    const dataSet = await (await fetch(`${admin}/api/data-sets/strict`)).text();
    const recent = (JSON.parse(dataSet) as { live: { recent_rejections: { error: string }[] } }).live.recent_rejections;
    assert.equal(recent.length, 5);
    assert.ok(recent.some((r) => r.error === 'schema validation failed: unknown field user_data.*'));
    const metrics = await (await fetch(`${admin}/metrics`)).text();
    assert.match(metrics, /ecapi_pii_redactions_total\{field="properties\.\*"\} 1/);
    assert.match(metrics, /ecapi_pii_redactions_total\{field="properties\.page_url"\} 1/);
    const served = [stats, dataSet, metrics, await (await fetch(`${admin}/api/overview`)).text(),
      await (await fetch(`${admin}/api/data-sets`)).text(), await (await fetch(`${admin}/api/stats/lenient?since=1h`)).text()];
    for (const secret of SECRETS) {
      for (const text of served) assert.ok(!text.includes(secret), `${secret} is not served to operators`);
      assert.ok(!server.output().includes(secret), `${secret} is not logged`);
    }
    if (TEST_PROFILE === 'sqlite') {
      const env = join(dataDir, 'production');
      for (const file of readdirSync(env).filter((f) => f.startsWith('ingest-stats.db'))) {
        const bytes = readFileSync(join(env, file)).toString('latin1');
        for (const secret of SECRETS) assert.ok(!bytes.includes(secret), `${secret} is not stored in ${file}`);
      }
    }
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

test('stored form: shapes, bounded paths, idempotence, unknown shapes cut to their prefix', () => {
  const cases: [string, string][] = [
    ['schema validation failed: unknown field user_data["mary@example.com"]', 'schema validation failed: unknown field user_data.*'],
    ['schema validation failed: unknown field user_data.address[2]["x\\"]y"]', 'schema validation failed: unknown field user_data.address[2].*'],
    ['schema validation failed: unknown field maryjones', 'schema validation failed: unknown field *'],
    ['schema validation failed: unknown field ["a b"]', 'schema validation failed: unknown field *'],
    ['hashed field user_data.email_address[3] is not a 64-char lowercase hex sha256', 'hashed field user_data.email_address[3] is not a 64-char lowercase hex sha256'],
    ['missing required field: timestamp', 'missing required field: timestamp'],
    ['hashed field user_data.email_address[] is not a 64-char lowercase hex sha256', 'hashed field user_data.email_address[] is not a 64-char lowercase hex sha256'],
    ['schema validation failed: unknown field user_data.address[].nick', 'schema validation failed: unknown field user_data.address[].*'],
    ['invalid field data_set_id: must equal X-Service-Data-Set', 'invalid field data_set_id: must equal X-Service-Data-Set'],
    ['invalid field properties.items[0].ext.note: contains a plaintext email address; x', 'invalid field properties.items[0].ext.*: contains a plaintext email address; x'],
    ['schema validation failed: source must be one of "website", "app", got "a\\", got \\"b"', 'schema validation failed: source must be one of "website", "app", got <value>'],
    ['schema validation failed: event must be a JSON object', 'schema validation failed: event must be a JSON object'],
    ['schema validation failed: event must have required property \'x\'', 'schema validation failed: event must have required property \'x\''],
    ['something new: with mary@example.com', 'rejected'],
    ['invalid field with an odd shape mary@example.com', 'invalid field'],
  ];
  for (const [message, stored] of cases) {
    assert.equal(storedReasonOf(message), stored, message);
    assert.equal(storedReasonOf(stored), stored, `idempotent: ${stored}`);
  }
  assert.equal(storedPathLabelOf('properties["bob@example.net"]'), 'properties.*');
  assert.equal(storedPathLabelOf('properties.items[7].name'), 'properties.items[].name');
  assert.equal(storedPathLabelOf('user_data.uids[1].ext.deep["k"][3]'), 'user_data.uids[].ext.*');
  assert.equal(storedPathLabelOf('custom_event'), 'custom_event');
  // Rows stored before the masking are masked, and merged with their group, when read.
  assert.equal(reasonGroupOf('schema validation failed: unknown field user_data["mary@example.com"]'), 'schema validation failed: unknown field user_data.*');
  const figures = figuresOf(new Map([
    ['reason:schema validation failed: unknown field user_data["mary@example.com"]', 2],
    ['reason:schema validation failed: unknown field user_data.*', 3],
  ]));
  assert.deepEqual(figures.ingest.rejections, { 'schema validation failed: unknown field user_data.*': 5 });
});
