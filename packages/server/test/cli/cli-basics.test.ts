/**
 * Issue 18, item 6: `--version`; an unknown data set is an error in every command that reads one
 * (one line on stderr, exit 1, the control plane's message), and on the admin API (404); the start
 * banner names the operator console's URL. Runs against the profile of ECAPI_TEST_PROFILE.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { cli, cliJson, startServer, tempDataDir } from '../helpers/server-process.js';

const VERSION = (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

test('--version prints the package version and exits 0', async () => {
  for (const flag of ['--version', '-V']) {
    const result = await cli(tempDataDir(), [flag]);
    assert.equal(result.code, 0);
    assert.equal(result.stdout.trim(), VERSION);
    assert.equal(result.stderr, '');
  }
});

test('a mistyped command or option gets commander\'s suggestion, on the one line of the error (issue 31)', async () => {
  const dataDir = tempDataDir();
  const cases: [string[], string][] = [
    [['sned'], "error: unknown command 'sned' (Did you mean send?)\n"],
    [['key', 'crate'], "error: unknown command 'crate' (Did you mean create?)\n"],
    [['data-set', 'list', '--jsno'], "error: unknown option '--jsno' (Did you mean --json?)\n"],
    [['identities', 'get', 'shop', '--identifer', 'email:x'], "error: unknown option '--identifer' (Did you mean --identifier?)\n"],
  ];
  for (const [args, stderr] of cases) {
    const result = await cli(dataDir, args);
    assert.equal(result.code, 2, `${args.join(' ')}: a usage error`);
    assert.equal(result.stderr, stderr);
  }
  // Nothing close: no suggestion.
  assert.equal((await cli(dataDir, ['zzzzzz'])).stderr, "error: unknown command 'zzzzzz'\n");
});

test('an unknown data set is an error in every command that reads one', async () => {
  const dataDir = tempDataDir();
  await cliJson(dataDir, ['data-set', 'create', 'known']);
  const commands = [
    ['stats', 'nosuch'],
    ['stats', 'nosuch', '--json'],
    ['events', 'get', 'nosuch', 'some-id'],
    ['events', 'export', '--data-set', 'nosuch'],
    ['identities', 'get', 'nosuch', 'some-key'],
    ['queue', 'export', '--data-set', 'nosuch'],
    ['data-set', 'policy', 'nosuch', '--ip', 'drop'],
    ['data-set', 'limits', 'nosuch', '--rps', '5'],
    ['key', 'create', '--data-set', 'nosuch'],
  ];
  for (const args of commands) {
    const result = await cli(dataDir, args);
    assert.equal(result.code, 1, `${args.join(' ')}: exit code`);
    assert.equal(result.stdout, '', `${args.join(' ')}: prints nothing on stdout`);
    assert.equal(result.stderr, 'error: data set nosuch does not exist\n', `${args.join(' ')}: one line on stderr`);
  }
  // The known data set still reads (zeros are the truth there).
  const stats = await cliJson<{ data_set_id: string; totals: { received: number } }>(dataDir, ['stats', 'known']);
  assert.equal(stats.data_set_id, 'known');
  assert.equal(stats.totals.received, 0);
  assert.equal((await cli(dataDir, ['queue', 'export', '--data-set', 'known'])).code, 0);
});

test('the start banner prints the console URL; the admin API answers 404 for an unknown data set', async () => {
  const dataDir = tempDataDir();
  await cliJson(dataDir, ['data-set', 'create', 'known']);
  const server = await startServer({ dataDir });
  try {
    const url = `http://127.0.0.1:${server.adminPort}/console/`;
    // Written right after the "listening" log line the helper waits for.
    const banner = new RegExp(`^Operator console: ${url.replace(/[.]/g, '\\.')}$`, 'm');
    for (let i = 0; i < 50 && !banner.test(server.output()); i++) await new Promise((r) => setTimeout(r, 100));
    assert.match(server.output(), banner);
    const page = await fetch(url);
    assert.equal(page.status, 200, 'the printed URL serves the console');
    const unknown = await fetch(`http://127.0.0.1:${server.adminPort}/api/stats/nosuch`);
    assert.equal(unknown.status, 404);
    assert.deepEqual(await unknown.json(), { error: 'data set nosuch does not exist' });
    assert.equal((await fetch(`http://127.0.0.1:${server.adminPort}/api/stats/known`)).status, 200);
  } finally {
    await server.stop();
  }
});
