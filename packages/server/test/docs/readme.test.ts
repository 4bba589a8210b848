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
import { exportQueue, provision, startServer, tempDataDir } from '../helpers/server-process.js';

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

test("README's signed-sender example stores an event on a real server", async () => {
  const section = README.slice(README.indexOf('## Send a signed event'));
  const blocks = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
  const send = blocks.find((b) => b.includes('openssl dgst'));
  assert.ok(send, 'the section has a sh block that signs with openssl');
  const dataDir = tempDataDir();
  const { keyId, secret } = await provision(dataDir, ['acme-web']);
  const server = await startServer({ dataDir });
  try {
    const command = send.replace(
      'https://ingest.example.com/v1/events',
      `--cacert ${join(dataDir, 'tls', 'localhost-cert.pem')} https://127.0.0.1:${server.port}/v1/events`,
    );
    assert.notEqual(command, send, 'the example posts to https://ingest.example.com/v1/events');
    const output = execFileSync('bash', ['-c', command], {
      encoding: 'utf8',
      env: { ...process.env, ECAPI_KEY_ID: keyId, ECAPI_SECRET: secret },
    });
    assert.equal(output.trim(), '{"accepted":1}');
    const records = await exportQueue(dataDir);
    assert.equal(records.length, 1);
    assert.equal(records[0]!.data_set_id, 'acme-web');
  } finally {
    await server.stop();
  }
});
