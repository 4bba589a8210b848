/**
 * The OpenAPI document itself: `redocly lint` (the real CLI, recommended rules) finds no error and
 * no warning; the document is self-contained (every $ref inside it); its Event schema is the
 * protocol package's JSON Schema, inlined (scripts/inline-event-schema.mjs regenerates it, and
 * writes exactly the committed document).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { loadOpenApi, OPENAPI_PATH, redocly, SERVER_PACKAGE } from '../helpers/openapi.js';

const document = loadOpenApi();

test('redocly lint: no errors, no warnings', () => {
  const run = redocly(['lint', 'openapi.yaml', '--format', 'json']);
  const report = JSON.parse(run.stdout) as { totals: { errors: number; warnings: number }; problems: { message: string; location: { pointer: string }[] }[] };
  const problems = report.problems.map((p) => `${p.location[0]?.pointer}: ${p.message}`).join('\n');
  assert.deepEqual({ errors: report.totals.errors, warnings: report.totals.warnings }, { errors: 0, warnings: 0 }, problems);
  assert.equal(run.status, 0, run.output);
});

function refsIn(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) for (const item of node) refsIn(item, out);
  else if (node !== null && typeof node === 'object') {
    for (const [key, value] of Object.entries(node)) {
      if (key === '$ref' && typeof value === 'string') out.push(value);
      else refsIn(value, out);
    }
  }
  return out;
}

test('self-contained: every $ref points inside the document, and resolves', () => {
  // In the published YAML itself (bundling would hide an external reference by inlining it).
  const written = [...readFileSync(OPENAPI_PATH, 'utf8').matchAll(/\$ref:\s*['"]?([^'"\s},]+)/g)].map((m) => m[1]!);
  assert.ok(written.length > 50);
  assert.deepEqual(written.filter((ref) => !ref.startsWith('#/')), [], 'references outside openapi.yaml');
  const refs = refsIn(document);
  assert.ok(refs.length > 50);
  for (const ref of new Set(refs)) {
    assert.ok(ref.startsWith('#/'), `external reference ${ref}`);
    let node: any = document;
    for (const part of ref.slice(2).split('/')) node = node?.[part.replace(/~1/g, '/').replace(/~0/g, '~')];
    assert.ok(node !== undefined, `unresolved reference ${ref}`);
  }
});

test('the Event schema and everything it references equal the protocol package\'s JSON Schema', () => {
  const require = createRequire(import.meta.url);
  const schema = JSON.parse(readFileSync(require.resolve('@ecapi-ingest/protocol/schema/ecapi-event.schema.json'), 'utf8')) as { $defs: Record<string, unknown> };
  const rewrite = (node: unknown): unknown => JSON.parse(JSON.stringify(node).replace(/"#\/\$defs\//g, '"#/components/schemas/'));
  for (const [name, definition] of Object.entries(schema.$defs)) {
    assert.deepEqual(document.components.schemas[name], rewrite(definition), `components.schemas.${name} differs from the protocol's $defs.${name}: run scripts/inline-event-schema.mjs`);
  }
});

test('the inliner (scripts/inline-event-schema.mjs --check) writes exactly the committed document, byte for byte', () => {
  const run = spawnSync(process.execPath, [join(SERVER_PACKAGE, '..', '..', 'scripts', 'inline-event-schema.mjs'), '--check'], { encoding: 'utf8' });
  assert.equal(run.status, 0, `${run.stdout}${run.stderr}`);
  assert.match(run.stdout, /the inlined event schema is current/);
});

test('the public operation and the admin API are described', () => {
  const statuses = Object.keys(document.paths['/v1/events']!.post.responses).sort();
  assert.deepEqual(statuses, ['200', '207', '400', '401', '403', '404', '408', '413', '429', '431', '500']);
  const accept = document.paths['/v1/events']!.post.parameters.find((p: { name: string }) => p.name === 'Accept');
  assert.equal(accept.required, false, 'Accept is optional');
  for (const path of ['/healthz', '/readyz', '/metrics', '/api/stats/{dataSetId}', '/api/session', '/api/overview', '/api/timeseries', '/api/data-sets', '/api/data-sets/{id}', '/api/test-events']) {
    assert.ok(document.paths[path], `${path} is not described`);
  }
});
