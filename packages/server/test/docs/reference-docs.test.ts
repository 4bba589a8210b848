/**
 * The generated reference pages (docs/reference/cli.md, configuration.md, errors.md, metrics.md)
 * are what the code gives today: regenerated in memory and compared with the committed files. A
 * new command, option, error or metric without `npm run docs` fails here. The metrics page is also
 * checked against a real server's /metrics, so a metric registered somewhere the generator does
 * not build fails too; and every `ECAPI_*` variable in the sources must be on the configuration page.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { renderReferenceDocs } from '../../scripts/docs/reference-docs.js';
import { undocumentedVariables } from '../../scripts/docs/configuration-reference.js';
import { serviceMetrics } from '../../scripts/docs/metrics-reference.js';
import { REPO_ROOT } from '../../scripts/docs/repo-root.js';
import { startServer, tempDataDir } from '../helpers/server-process.js';

test('the committed reference pages are what the code generates', () => {
  for (const [path, expected] of renderReferenceDocs()) {
    let committed = '';
    try {
      committed = readFileSync(join(REPO_ROOT, path), 'utf8');
    } catch {
      // missing: reported below
    }
    if (committed !== expected) {
      const at = [...expected].findIndex((c, i) => committed[i] !== c);
      const line = expected.slice(0, Math.max(at, 0)).split('\n').length;
      assert.fail(`${path} differs from the code (first difference on line ${line}): run \`npm run docs\` and commit the result`);
    }
  }
});

test('every ECAPI_* variable the sources read is documented', () => {
  assert.deepEqual(
    undocumentedVariables(),
    [],
    'give the option an .env(), or add the variable to packages/server/scripts/docs/environment-variables.ts, then run `npm run docs`',
  );
});

test('the metrics page lists every ecapi_* metric a real server exposes, with its type', async () => {
  const server = await startServer({ dataDir: tempDataDir() });
  try {
    const res = await fetch(`http://127.0.0.1:${server.adminPort}/metrics`);
    assert.equal(res.status, 200);
    const exposed = [...(await res.text()).matchAll(/^# TYPE (ecapi_\w+) (\w+)$/gm)].map(([, name, type]) => `${name} ${type}`).sort();
    const documented = serviceMetrics().map((m) => `${m.name} ${m.type}`).sort();
    assert.ok(exposed.length > 10, `the scrape has the service's metrics: ${exposed.length}`);
    assert.deepEqual(
      exposed,
      documented,
      'a metric is registered where scripts/docs/metrics-reference.ts does not build it: register it there as service.ts does, then run `npm run docs`',
    );
  } finally {
    await server.stop();
  }
});
