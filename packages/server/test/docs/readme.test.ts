/**
 * README.md is the newcomer's page (issue 31): short, the two quickstart commands, every guide and
 * reference page one click away, and a signed-sender example that works: its curl command, run in
 * bash against a real server (only the URL pointed at it and its CA trusted), stores the event.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { extractLinks } from '../../scripts/docs/markdown-links.js';
import { REPO_ROOT } from '../../scripts/docs/repo-root.js';
import { BIN, exportQueue, profileEnv, startServer, tempDataDir } from '../helpers/server-process.js';

const README = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');

test('README is short, has the quickstart, and links every guide and reference page', () => {
  const lines = README.split('\n').length;
  assert.ok(lines <= 250, `README.md has ${lines} lines; keep it at most 250 and move detail into docs/`);
  assert.match(README, /^npm ci && npm start\b/m);
  assert.match(README, /^npm ci && npm test\b/m);
  const links = new Set(extractLinks(README).map((l) => l.href.split('#')[0]));
  for (const dir of ['docs/guides', 'docs/reference']) {
    for (const page of readdirSync(join(REPO_ROOT, dir)).filter((f) => f.endsWith('.md'))) {
      assert.ok(links.has(`${dir}/${page}`), `README.md links ${dir}/${page}`);
    }
  }
});

test("README's signed-sender example, run as written, stores an event on a real server", async () => {
  const section = README.slice(README.indexOf('## Send a signed event'));
  const blocks = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
  const setup = blocks.find((b) => b.includes('key create'));
  const send = blocks.find((b) => b.includes('openssl dgst'));
  assert.ok(setup && send, 'the section has a sh block that creates a key and one that signs with openssl');
  // As a reader does: the commands as written (`npx ecapi-ingest` is this checkout's CLI, the data
  // dir the server's), the printed key id and secret pasted where the export line says, then the
  // send block with only the URL pointed at the server and its CA trusted.
  const dataDir = tempDataDir();
  const env: NodeJS.ProcessEnv = { ...process.env, ECAPI_DATA_DIR: dataDir, ...(await profileEnv(dataDir)) };
  delete env.ECAPI_KEY_ID;
  delete env.ECAPI_SECRET;
  const bash = (script: string) => execFileSync('bash', ['-euo', 'pipefail', '-c', script], { encoding: 'utf8', env });
  const lines = setup.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('#'));
  const exportLine = lines.find((l) => l.startsWith('export '));
  assert.ok(exportLine?.includes("ECAPI_KEY_ID='key_…'") && exportLine.includes("ECAPI_SECRET='sk_…'"),
    'the setup block says where the key id and secret go (the send block reads $ECAPI_KEY_ID and $ECAPI_SECRET)');
  // The setup before the server starts: what it loads at start, a running server picks up within a second.
  let key: { key_id: string; secret: string } | undefined;
  for (const line of lines.filter((l) => l !== exportLine)) {
    const output = bash(line.replace(/^npx ecapi-ingest /, `${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)} `));
    if (line.includes('key create')) key = JSON.parse(output) as { key_id: string; secret: string };
  }
  assert.ok(key, 'key create printed the key');
  const server = await startServer({ dataDir });
  try {
    const command = send.replace(
      'https://ingest.example.com/v1/events',
      `--cacert ${join(dataDir, 'tls', 'localhost-cert.pem')} https://127.0.0.1:${server.port}/v1/events`,
    );
    assert.notEqual(command, send, 'the example posts to https://ingest.example.com/v1/events');
    const pasted = exportLine!.replace('key_…', key.key_id).replace('sk_…', key.secret);
    const output = bash(`${pasted}\n${command}`);
    assert.equal(output.trim(), '{"accepted":1}');
    const records = await exportQueue(dataDir);
    assert.equal(records.length, 1);
    assert.equal(records[0]!.data_set_id, 'acme-web');
  } finally {
    await server.stop();
  }
});
