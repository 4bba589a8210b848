/**
 * Black-box: the real server's /metrics against Prometheus' own tools and conventions.
 * - `promtool check metrics` is clean, idle and after traffic of every kind (issue 18).
 * - The standard `process_*` and `nodejs_*` names are there (stock Node.js dashboards query them).
 * - No label value comes from a sender: traffic full of marked hostile values (data set ids, key
 *   ids, paths, version segments, event keys holding PII) leaves no trace of the marker anywhere
 *   in the exposition, and every label of every sample is one the server chose.
 * - Every metric the shipped Grafana dashboard and Prometheus rules (deploy/) query exists.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cliJson, provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import { postSigned, request, sampleEvent, type Credentials } from '../helpers/https-client.js';
import { runTool, toolSkip } from '../helpers/external-tool.js';

const DEPLOY = fileURLToPath(new URL('../../../../../deploy/', import.meta.url));
const MARK = 'zzhostile';
const DS = 'shop-metrics';

let server: ServerProcess;
let creds: Credentials;

before(async () => {
  const dataDir = tempDataDir();
  creds = await provision(dataDir, [DS]);
  await cliJson(dataDir, ['data-set', 'limits', DS, '--burst-rps', '3', '--rps', '1']);
  server = await startServer({ dataDir, args: ['--failed-auth-burst', '3', '--failed-auth-rps', '1'] });
});
after(async () => {
  await server?.stop();
});

async function scrape(): Promise<string> {
  const response = await fetch(`http://127.0.0.1:${server.adminPort}/metrics`);
  assert.equal(response.status, 200);
  assert.match(response.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  return response.text();
}

interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
}

/** The samples of a text exposition (label values unescaped). */
function samples(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? \S+$/.exec(line);
    assert.ok(match, `unparsable sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const pair of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[pair[1]!] = JSON.parse(`"${pair[2]}"`) as string;
    out.push({ name: match[1]!, labels });
  }
  return out;
}

/** Every metric family name a query may use for the samples: `x_bucket` etc. and the family `x`. */
function queryableNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const s of samples(text)) names.add(s.name);
  for (const line of text.split('\n')) if (line.startsWith('# TYPE ')) names.add(line.split(' ')[2]!);
  return names;
}

/** Label names and allowed values: a set of values, or a pattern. Anything else fails the audit. */
const LABELS: Record<string, ReadonlySet<string> | RegExp> = {
  status: /^[1-5][0-9][0-9]$/,
  // ecapi_events_rejected_total; ecapi_untrusted_connections_closed_total (the pre-auth defences' closes);
  // ecapi_tls_handshake_failures_total.
  reason: new Set([
    'schema', 'missing_field', 'invalid_field', 'not_hashed', 'data_set_mismatch', 'other', 'deadline', 'refusals', 'connection_cap', 'handshake_cap',
    'timeout', 'protocol', 'certificate', 'reset', 'plain_http', 'proxy_header',
  ]),
  // ecapi_public_timeouts_total.
  timeout: new Set(['headers', 'request', 'body_idle', 'body_rate', 'idle']),
  // ecapi_protocol_errors_total.
  protocol: new Set(['http1', 'http2']),
  // ecapi_rate_limited_total; ecapi_http2_streams_refused_total (body_wait).
  limit: new Set(['burst', 'requests', 'events', 'failed_auth', 'body_wait']),
  // A schema path in its stored form: known members, `[]` for indexes, `*` for unknown members.
  field: /^[a-z_]+(?:\.(?:[a-z_]+|\*)|\[\])*$/,
  le: /^(?:[0-9.e+-]+|\+Inf)$/,
  // ecapi_storage_bytes (lifecycle/disk-usage.ts): the stores of the data dir.
  store: new Set(['queue', 'body_log', 'view', 'control', 'lifecycle', 'ingest_stats']),
  // prom-client's default metrics.
  // Node handle class names (nodejs_active_handles): Http2SecureServer on a one-process node.
  type: /^[A-Za-z][A-Za-z0-9]*$/,
  space: /^[a-z_]+$/,
  kind: new Set(['major', 'minor', 'incremental', 'weakcb']),
  version: /^v\d+\.\d+\.\d+$/,
  major: /^\d+$/,
  minor: /^\d+$/,
  patch: /^\d+$/,
};

function assertPromtoolClean(text: string, when: string): void {
  const run = runTool('promtool', ['check', 'metrics'], { input: text });
  assert.equal(run.status, 0, `promtool check metrics (${when}):\n${run.output}`);
}

const promtool = toolSkip('promtool', 'prometheus');

async function hostileTraffic(): Promise<void> {
  const ok = await postSigned(server.port, server.ca, creds, DS, JSON.stringify(sampleEvent(DS, {
    properties: { [`${MARK}_key`]: `write to ${MARK}@example.com`, [`${MARK}_nested`]: { [`${MARK}_deeper`]: `${MARK}.x@example.org` } },
  })));
  assert.equal(ok.status, 200, ok.text);
  const batch = JSON.stringify({
    events: [
      sampleEvent(DS),
      sampleEvent(DS, { event_type: `${MARK}_type` }),
      sampleEvent(DS, { [`${MARK}_top`]: 1 }),
      sampleEvent(DS, { user_data: { email_sha256: MARK } }),
      sampleEvent(DS, { timestamp: undefined }),
    ],
  });
  const partial = await postSigned(server.port, server.ca, creds, DS, batch);
  assert.equal(partial.status, 207, partial.text);
  const foreign = await postSigned(server.port, server.ca, creds, DS, JSON.stringify(sampleEvent(`${MARK}-other-ds`)));
  assert.equal(foreign.status, 401, foreign.text);
  // Over the data set's burst limit: 429 burst/requests (before the failed authentications below shed this address).
  const statuses: number[] = [];
  for (let i = 0; i < 6; i++) statuses.push((await postSigned(server.port, server.ca, creds, DS, JSON.stringify(sampleEvent(DS)))).status);
  assert.ok(statuses.includes(429), `no 429 among ${statuses.join(',')}`);
  // Unknown key id and data set (401), then the failed-authentication throttle (429 failed_auth).
  const refused: number[] = [];
  for (let i = 0; i < 12 && !refused.includes(429); i++) {
    refused.push((await postSigned(server.port, server.ca, { keyId: `${MARK}-key`, secret: 'x' }, `${MARK}-ds`, '{}')).status);
  }
  assert.deepEqual([refused[0], refused.at(-1)], [401, 429], refused.join(','));
  const gateway = await request(server.port, server.ca, { method: 'POST', path: `/${MARK}/path`, body: '{}', headers: { authorization: MARK } });
  assert.equal(gateway.status, 403);
  const version = await request(server.port, server.ca, { method: 'POST', path: `/v${MARK}/events`, body: '{}' });
  assert.equal(version.status, 404);
}

test('promtool check metrics is clean on an idle server', { skip: promtool }, async () => {
  assertPromtoolClean(await scrape(), 'idle');
});

test('standard process_* and nodejs_* names, no prefixed copies', async () => {
  const names = queryableNames(await scrape());
  for (const name of ['process_cpu_seconds_total', 'process_resident_memory_bytes', 'process_open_fds', 'nodejs_eventloop_lag_p99_seconds', 'nodejs_heap_size_used_bytes', 'nodejs_gc_duration_seconds', 'nodejs_version_info', 'nodejs_active_handles']) {
    assert.ok(names.has(name), `${name} missing from /metrics`);
  }
  const odd = [...names].filter((n) => !/^(?:ecapi_|process_|nodejs_)/.test(n) || /^ecapi_(?:process|nodejs)_/.test(n));
  assert.deepEqual(odd, []);
});

test('after hostile traffic: promtool clean, no sender value in any label, every label one the server chose', async () => {
  await hostileTraffic();
  const text = await scrape();
  if (!promtool) assertPromtoolClean(text, 'after traffic');
  assert.ok(!text.toLowerCase().includes(MARK), `a sender's value reached /metrics:\n${text.split('\n').filter((l) => l.toLowerCase().includes(MARK)).join('\n')}`);
  const all = samples(text);
  for (const sample of all) {
    for (const [name, value] of Object.entries(sample.labels)) {
      const allowed = LABELS[name];
      assert.ok(allowed, `${sample.name}: label ${name} is not in the audited list`);
      assert.ok(allowed instanceof RegExp ? allowed.test(value) : allowed.has(value), `${sample.name}{${name}="${value}"}`);
    }
  }
  const seen = (metric: string, label: string) => new Set(all.filter((s) => s.name === metric).map((s) => s.labels[label]));
  // The traffic did reach every labelled family (otherwise the audit above proves little).
  for (const status of ['200', '207', '401', '403', '404', '429']) assert.ok(seen('ecapi_requests_total', 'status').has(status), `no ecapi_requests_total{status="${status}"}`);
  assert.ok(seen('ecapi_rate_limited_total', 'limit').has('failed_auth'));
  assert.ok([...seen('ecapi_rate_limited_total', 'limit')].some((l) => l !== 'failed_auth'), 'no data set limit hit');
  assert.ok(seen('ecapi_events_rejected_total', 'reason').size >= 2, [...seen('ecapi_events_rejected_total', 'reason')].join(','));
  assert.ok(seen('ecapi_pii_redactions_total', 'field').has('properties.*'), `pii fields: ${[...seen('ecapi_pii_redactions_total', 'field')].join(',')}`);
});

/** Metric names in PromQL expressions: identifiers of our families (not functions, labels or keywords). */
function metricNamesIn(expr: string): string[] {
  return [...expr.matchAll(/\b((?:ecapi|process|nodejs)_[a-z0-9_]+)\b/g)].map((m) => m[1]!);
}

test('every metric the deploy/ dashboard and alert rules query is in a real scrape', async () => {
  const names = queryableNames(await scrape());
  const dashboard = JSON.parse(readFileSync(`${DEPLOY}grafana/ecapi-ingest.json`, 'utf8')) as { panels: { targets?: { expr: string }[] }[]; templating: { list: { definition?: string }[] } };
  const exprs = [
    ...dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr)),
    ...dashboard.templating.list.flatMap((v) => (v.definition ? [v.definition] : [])),
    ...[...readFileSync(`${DEPLOY}prometheus/ecapi-ingest.rules.yml`, 'utf8').matchAll(/^\s+expr: (?:\|\n)?([\s\S]*?)(?=\n\s+(?:for|labels):)/gm)].map((m) => m[1]!),
  ];
  assert.ok(exprs.length >= 25, `only ${exprs.length} expressions found`);
  const used = new Set(exprs.flatMap(metricNamesIn));
  assert.ok(used.size >= 15, `only ${used.size} metric names found`);
  const missing = [...used].filter((n) => !names.has(n));
  assert.deepEqual(missing, [], 'metrics the dashboard or rules use but /metrics does not have');
});

test('every query of the Grafana dashboard is valid PromQL (promtool parses it as a recording rule)', { skip: promtool }, () => {
  const dashboard = JSON.parse(readFileSync(`${DEPLOY}grafana/ecapi-ingest.json`, 'utf8')) as { panels: { title: string; targets?: { expr: string }[] }[] };
  // Grafana's variables, as Grafana would substitute them.
  const substitute = (expr: string) => expr.replaceAll('$__rate_interval', '5m').replace(/\$(?:job|instance)\b/g, '.*');
  const rules = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t, i) => ({ record: `dashboard:panel_${p.title.replace(/[^a-z0-9]+/gi, '_').toLowerCase()}:${i}`, expr: substitute(t.expr) })));
  assert.ok(rules.length >= 20);
  const dir = mkdtempSync(join(tmpdir(), 'ecapi-dashboard-'));
  try {
    // JSON is YAML: promtool reads this rules file as written.
    writeFileSync(join(dir, 'dashboard.rules.yml'), JSON.stringify({ groups: [{ name: 'dashboard', rules }] }));
    const check = runTool('promtool', ['check', 'rules', 'dashboard.rules.yml'], { cwd: dir });
    assert.equal(check.status, 0, check.output);
    assert.match(check.output, new RegExp(`SUCCESS: ${rules.length} rules found`));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('promtool check rules and the rules unit tests pass', { skip: promtool }, () => {
  const check = runTool('promtool', ['check', 'rules', 'ecapi-ingest.rules.yml'], { cwd: `${DEPLOY}prometheus` });
  assert.equal(check.status, 0, check.output);
  assert.match(check.output, /SUCCESS: \d+ rules found/);
  const unit = runTool('promtool', ['test', 'rules', 'ecapi-ingest.rules.test.yml'], { cwd: `${DEPLOY}prometheus` });
  assert.equal(unit.status, 0, unit.output);
});
