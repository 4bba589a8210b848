/**
 * The README's first run: `serve` on a fresh data dir prints a demo key and a copy-paste command;
 * running that command in bash (openssl + curl) gets a 200 and the event is queued.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { exportQueue, startServer, tempDataDir } from '../helpers/server-process.js';

test('the demo command printed on first run gets a 200', async () => {
  const dataDir = tempDataDir();
  const server = await startServer({ dataDir, demo: true });
  try {
    const findCommand = () => server.output().split('\n').find((l) => l.startsWith('TS=$(date +%s)'));
    for (let i = 0; i < 50 && !findCommand(); i++) await new Promise((r) => setTimeout(r, 100));
    const command = findCommand();
    assert.ok(command, `the banner prints the demo command:\n${server.output()}`);
    const output = execFileSync('bash', ['-c', command], { cwd: process.cwd(), encoding: 'utf8' });
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
