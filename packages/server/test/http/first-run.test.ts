/**
 * The README's first run: `serve` on a fresh data dir prints a demo key and a copy-paste command;
 * running that command in bash (openssl + curl) gets a 200 and the event is queued.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exportQueue, startServer, tempDataDir } from '../helpers/server-process.js';
import { demoCurlCommand } from '../../src/demo.js';

test('the demo command printed on first run gets a 200', async () => {
  const dataDir = tempDataDir();
  const server = await startServer({ dataDir, demo: true });
  try {
    const findCommand = () => server.output().split('\n').find((l) => l.startsWith('TS=$(date +%s)'));
    for (let i = 0; i < 50 && !findCommand(); i++) await new Promise((r) => setTimeout(r, 100));
    const command = findCommand();
    assert.ok(command, `the banner prints the demo command:\n${server.output()}`);
    // Pasted in another directory than the server's: the certificate's path is absolute.
    const output = execFileSync('bash', ['-c', command], { cwd: tmpdir(), encoding: 'utf8' });
    assert.match(output, /\{"accepted":1\}\nHTTP 200/);
    const records = await exportQueue(dataDir);
    assert.equal(records.length, 1);
    assert.equal(records[0]!.data_set_id, 'demo');
    assert.equal(records[0]!.event.event_type, 'purchase');
  } finally {
    await server.stop();
  }
  // A second start reuses the environment: no new demo key is created or printed.
  const again = await startServer({ dataDir, demo: true });
  try {
    assert.ok(!again.output().includes('First run'));
  } finally {
    await again.stop();
  }
});

test('the demo command names the certificate by its absolute path, even under the working directory', () => {
  const certFile = join('data', 'tls', "it's-cert.pem"); // relative, under the working directory, with a quote
  const command = demoCurlCommand({ key: { keyId: 'key_x', secret: 's', dataSets: ['demo'] } as never, host: '0.0.0.0', port: 8443, certFile });
  const quoted = join(process.cwd(), 'data', 'tls', "it'\\''s-cert.pem");
  assert.ok(command.includes(`--cacert '${quoted}'`), command);
  // bash reads it back as the one absolute path.
  const cacert = /--cacert ('(?:[^']|'\\'')*') /.exec(command)![1]!;
  assert.equal(execFileSync('bash', ['-c', `printf '%s' ${cacert}`], { encoding: 'utf8' }), join(process.cwd(), certFile));
});
