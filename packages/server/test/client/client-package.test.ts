/**
 * The published SDK as a user gets it: `npm pack` of packages/client, `npm install` of that one
 * tarball into an empty project (its registry dependencies come from npm's cache or registry, as
 * for any user), then the example of packages/client/README.md, taken from the README itself, run
 * against a real server; and the packed types compiled standalone (a misspelt event type fails).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { exportQueue, provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';

const run = promisify(execFile);
const CLIENT_DIR = fileURLToPath(new URL('../../../../client/', import.meta.url));
const TSC = fileURLToPath(new URL('../../../../../node_modules/typescript/bin/tsc', import.meta.url));
/** The npm that runs the tests (npm test), else the one on PATH. */
const npm = (args: string[], cwd: string) => {
  const flags = [...args, '--no-audit', '--no-fund', '--ignore-scripts', '--loglevel', 'error'];
  const options = { cwd, env: { ...process.env, npm_config_update_notifier: 'false' }, timeout: 180_000 };
  const cli = process.env.npm_execpath;
  return cli && /\.c?js$/.test(cli) ? run(process.execPath, [cli, ...flags], options) : run('npm', flags, options);
};

let dataDir: string;
let server: ServerProcess;
let creds: { keyId: string; secret: string };
let project: string;

before(async () => {
  dataDir = tempDataDir();
  creds = await provision(dataDir, ['sdk']);
  server = await startServer({ dataDir, args: ['--workers', '1'] });
  const packDir = mkdtempSync(join(tmpdir(), 'ecapi-pack-'));
  await npm(['pack', '--pack-destination', packDir], CLIENT_DIR);
  const tarball = join(packDir, readdirSync(packDir).find((f) => f.endsWith('.tgz'))!);
  project = mkdtempSync(join(tmpdir(), 'ecapi-sdk-user-'));
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'sdk-user', private: true, type: 'module' }));
  await npm(['install', '--prefer-offline', tarball], project);
});
after(async () => {
  await server.stop();
});

test('the packed client installs alone: no @ecapi-ingest dependency, README and LICENSE inside', () => {
  const manifest = JSON.parse(readFileSync(join(project, 'node_modules/@ecapi-ingest/client/package.json'), 'utf8'));
  assert.deepEqual(Object.keys(manifest.dependencies ?? {}).filter((d) => d.startsWith('@ecapi-ingest/')), []);
  assert.deepEqual(readdirSync(join(project, 'node_modules/@ecapi-ingest')), ['client'], 'no other package of this repository was installed');
  assert.match(readFileSync(join(project, 'node_modules/@ecapi-ingest/client/LICENSE'), 'utf8'), /Apache License\s+Version 2\.0/);
  assert.match(readFileSync(join(project, 'node_modules/@ecapi-ingest/client/README.md'), 'utf8'), /## Example/);
});

test("the README's install is the one that works: a tarball from npm pack (the package is not published)", () => {
  const readme = readFileSync(join(CLIENT_DIR, 'README.md'), 'utf8');
  const install = /## Install\n[\s\S]*?```sh\n([\s\S]*?)```/.exec(readme)?.[1] ?? '';
  assert.match(install, /npm pack/, 'the install section builds the tarball, as the before() hook does');
  assert.match(install, /^npm install \S+\.tgz/m, 'and installs the tarball');
  assert.doesNotMatch(install, /^npm install @ecapi-ingest\/client/m, 'npm install @ecapi-ingest/client fails: it is not published');
});

test('the README example sends events to a running server', async () => {
  const readme = readFileSync(join(CLIENT_DIR, 'README.md'), 'utf8');
  const example = /```js\n([\s\S]*?)```/.exec(readme)![1]!;
  assert.ok(example.split('\n').length <= 25, 'about 20 lines');
  writeFileSync(join(project, 'send.mjs'), example);
  const caFile = join(dataDir, 'tls', 'localhost-cert.pem');
  const env = { ...process.env, ECAPI_URL: `https://127.0.0.1:${server.port}`, ECAPI_KEY_ID: creds.keyId, ECAPI_SECRET: creds.secret, ECAPI_DATA_SET: 'sdk', ECAPI_CA: caFile };
  const { stdout } = await run(process.execPath, ['send.mjs'], { cwd: project, env });
  const lines = stdout.trim().split('\n').map((l) => l.trim().split(/\s+/));
  assert.deepEqual(lines.map((l) => l.slice(0, 2)), [['0', 'accepted'], ['1', 'accepted']], stdout);
  const queued = await exportQueue(dataDir, 'production', ['--data-set', 'sdk']);
  const ids = new Set(queued.map((q) => q.event.id));
  for (const l of lines) assert.ok(ids.has(l[2]), `event ${l[2]} queued`);
  const purchase = queued.find((q) => q.event.id === lines[0]![2])!;
  assert.match(purchase.event.user_data.email_address[0], /^[0-9a-f]{64}$/, 'hashed before it left');

  // A wrong secret: the example's own failure branch, one AUTHENTICATION error.
  const wrong = await run(process.execPath, ['send.mjs'], { cwd: project, env: { ...env, ECAPI_SECRET: 'sk_wrong' } }).then(() => undefined, (e: { stderr: string }) => e.stderr);
  assert.match(wrong ?? '', /AUTHENTICATION: 401 signature does not match/);
});

test('the packed types compile standalone, and a misspelt event type does not', async () => {
  writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({ compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', strict: true, noEmit: true, skipLibCheck: false } }));
  writeFileSync(join(project, 'ok.ts'), [
    "import { Client, type EventInput, type SendResult } from '@ecapi-ingest/client';",
    "const events: EventInput[] = [{ timestamp: 1, event_type: 'purchase', value: 1, currency_code: 'USD' }];",
    "export async function go(c: Client): Promise<SendResult> { return c.send(events); }",
  ].join('\n'));
  writeFileSync(join(project, 'typo.ts'), "import type { EventInput } from '@ecapi-ingest/client';\nexport const e: EventInput = { timestamp: 1, event_type: 'purchse' };\n");
  await run(process.execPath, [TSC, '-p', '.', '--noEmit', '--types', 'node', '--typeRoots', join(fileURLToPath(new URL('../../../../../node_modules/@types', import.meta.url)))], { cwd: project }).catch((e: { stdout: string }) => {
    assert.match(e.stdout, /typo\.ts\(2,\d+\): error TS\d+: Type '"purchse"' is not assignable to type 'EventType'/);
    assert.doesNotMatch(e.stdout, /ok\.ts/, e.stdout);
    return 'failed as expected';
  }).then((r) => assert.equal(r, 'failed as expected'));
});
