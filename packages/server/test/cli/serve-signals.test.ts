/**
 * `serve` stopped while it starts: a SIGTERM that arrives after the process has begun opening its
 * stores but before it listens (what a supervisor does when it gives up on a slow start, or a test
 * that stops it early) ends it cleanly, exit 0, with its stop logged, rather than by the signal. Its
 * handlers are installed before anything is opened; the stop is carried out once the start is done.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { BIN, tempDataDir } from '../helpers/server-process.js';

for (const workers of ['1', '2']) {
  test(`serve --workers ${workers}: SIGTERM during the start exits 0 and logs the stop`, { timeout: 60_000 }, async () => {
    const dataDir = tempDataDir('ecapi-serve-signals-');
    const child = spawn(
      process.execPath,
      [BIN, '--data-dir', dataDir, 'serve', '--port', '0', '--admin-port', '0', '--no-demo', '--workers', workers],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ECAPI_LOG_LEVEL: 'info' } },
    );
    let output = '';
    let signalled = false;
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    const onData = (text: string) => {
      output += text;
      // The first log line is written while the stores open, before any port is bound.
      if (!signalled && output.includes('"control plane loaded"')) {
        signalled = true;
        child.kill('SIGTERM');
      }
    };
    child.stdout!.setEncoding('utf8').on('data', onData);
    child.stderr!.setEncoding('utf8').on('data', onData);
    const { code, signal } = await exited;
    assert.ok(signalled, `the start was seen: ${output}`);
    assert.equal(signal, null, `ended by ${signal}, not by its own stop:\n${output}`);
    assert.equal(code, 0, output);
    assert.match(output, /"signal":"SIGTERM".*"msg":"shutting down"/, output);
  });
}
