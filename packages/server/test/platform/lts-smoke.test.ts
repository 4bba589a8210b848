/**
 * The smoke run of a supported Node.js line, as a user meets it: every step is the real
 * `ecapi-ingest` binary started by the Node.js that runs this test (`process.execPath`), so
 * `.ci/run` runs this file once more under Node 26 after the whole suite under Node 24.
 *
 * provision with the CLI → serve → one signed event answered 200 → `queue export` shows it →
 * SIGTERM ends the server with exit code 0.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { BIN, startServer, tempDataDir } from '../helpers/server-process.js';
import { postSigned, sampleEvent } from '../helpers/https-client.js';

function ecapiIngest(dataDir: string, args: string[]): string {
  return execFileSync(process.execPath, [BIN, '--data-dir', dataDir, ...args], { encoding: 'utf8' });
}

test(`Node.js ${process.version}: provision, serve, one signed event, queue export, SIGTERM`, async () => {
  const dataDir = tempDataDir('ecapi-smoke-');
  ecapiIngest(dataDir, ['data-set', 'create', 'smoke']);
  const key = JSON.parse(ecapiIngest(dataDir, ['--json', 'key', 'create', '--data-set', 'smoke'])) as { key_id: string; secret: string };

  const server = await startServer({ dataDir });
  let exitCode: number | null;
  try {
    const event = sampleEvent('smoke', { id: 'smoke-1' });
    const result = await postSigned(server.port, server.ca, { keyId: key.key_id, secret: key.secret }, 'smoke', JSON.stringify(event));
    assert.equal(result.status, 200, result.text);
    assert.deepEqual(result.json(), { accepted: 1 });

    const exported = ecapiIngest(dataDir, ['queue', 'export']).split('\n').filter((line) => line !== '');
    assert.equal(exported.length, 1);
    const record = JSON.parse(exported[0]!) as { data_set_id: string; event: { id: string } };
    assert.equal(record.data_set_id, 'smoke');
    assert.equal(record.event.id, 'smoke-1');
  } finally {
    exitCode = await server.stop('SIGTERM');
  }
  assert.equal(exitCode, 0, `serve exits 0 on SIGTERM:\n${server.output()}`);
});
