/**
 * `npm start` and `npx … serve` stop with a SIGTERM to npm (issue 31, a newcomer's first hour; the
 * operator guide's `npx ecapi-ingest serve &` then `kill $!`): npm forwards the signal to the shell
 * that runs the command, which dies of it without passing it on, so serve (and its consumer) used
 * to be left running, orphaned, holding the ports. Real npm, a real shell, the real serve process: a
 * start script shaped like the repository's (`sh -c "… && node … serve"`), or `npm exec` (what npx
 * runs), SIGTERM to npm, and every process of that data dir must be gone, after a graceful shutdown.
 * The watch itself (npm-parent-watch.ts) is tested with a given parent pid: only under npm start or npx.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { watchNpmParent } from '../../src/cli/npm-parent-watch.js';
import { BIN, profileArgs, tempDataDir } from '../helpers/server-process.js';

/** Pids whose command line names this data dir, from /proc. */
function processesOf(dataDir: string): number[] {
  const found: number[] = [];
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (/\) Z /.test(stat)) continue; // a zombie has exited
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\u0000', ' ').includes(dataDir)) found.push(Number(pid));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

for (const launcher of ['npm start', 'npx'] as const) {
  test(`a SIGTERM to \`${launcher}\` stops serve and its consumer gracefully`, { skip: !existsSync('/proc/self/stat') && 'needs /proc' }, async () => {
    const dataDir = tempDataDir();
    const project = join(dataDir, '..', `${dataDir.split('/').pop()}-project`);
    mkdirSync(project);
    const serve = [process.execPath, BIN, '--data-dir', dataDir, ...(await profileArgs(dataDir)), 'serve', '--port', '0', '--admin-port', '0', '--no-demo', '--workers', '1'];
    // As the repository's start script: a shell that runs a step, then node as its child.
    const start = `true && ${serve.map(quote).join(' ')}`;
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'npm-parent-watch', private: true, scripts: { start } }));
    const rootStart = (JSON.parse(readFileSync(join(dirname(BIN), '../../../../../package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start;
    assert.match(rootStart, /&& (exec )?node \S+ecapi-ingest\.js serve$/, 'the repository starts serve the same way');

    // The npm running this suite (`npm test`), else the one on PATH, run by this Node. npx is `npm exec`.
    const npmCli = process.env.npm_execpath ?? realpathSync(execFileSync('sh', ['-c', 'command -v npm'], { encoding: 'utf8' }).trim());
    const args = launcher === 'npm start' ? ['start', '--silent'] : ['exec', '--no', '--', ...serve];
    // Not this suite's npm variables: serve must see only what its own launcher sets.
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('npm_')));
    const npm = spawn(process.execPath, [npmCli, ...args], {
      cwd: project,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...env, PATH: `${dirname(process.execPath)}:${process.env.PATH}`, ECAPI_LOG_LEVEL: 'info' },
    });
    let output = '';
    npm.stdout!.setEncoding('utf8').on('data', (t: string) => (output += t));
    npm.stderr!.setEncoding('utf8').on('data', (t: string) => (output += t));
    try {
      // Guards, not measurements: each bounds a wait that would otherwise hang the suite.
      for (let i = 0; i < 300 && !output.includes('"consumer started"') && npm.exitCode === null; i++) await sleep(100);
      assert.match(output, /"ecapi-ingest listening"/, `serve started:\n${output}`);
      assert.ok(processesOf(dataDir).length >= 2, 'serve and its consumer run');

      npm.kill('SIGTERM');
      await once(npm, 'exit');
      for (let i = 0; i < 600 && processesOf(dataDir).length > 0; i++) await sleep(100);
      assert.deepEqual(processesOf(dataDir), [], `serve and its consumer exited after npm did (they were left running):\n${output}`);
      assert.match(output, new RegExp(`"reason":"the ${launcher} that ran it has exited","msg":"shutting down"`));
      assert.match(output, /"msg":"ecapi-ingest stopped"/);
    } finally {
      for (const pid of processesOf(dataDir)) process.kill(pid, 'SIGKILL');
    }
  });
}

test('the parent watch runs only under npm start or npx, and fires once when the parent changes', async () => {
  let ppid = 100;
  let gone = 0;
  assert.equal(watchNpmParent({ env: {}, onGone: () => gone++, parentPid: () => ppid, pollMs: 1 }), null);
  assert.equal(watchNpmParent({ env: { npm_lifecycle_event: 'test' }, onGone: () => gone++, parentPid: () => ppid, pollMs: 1 }), null);
  const npx = watchNpmParent({ env: { npm_lifecycle_event: 'npx', npm_command: 'exec' }, onGone: () => gone++, parentPid: () => ppid, pollMs: 1 });
  assert.ok(npx, 'npx watches too');
  npx();
  const stop = watchNpmParent({ env: { npm_lifecycle_event: 'start' }, onGone: () => gone++, parentPid: () => ppid, pollMs: 1 });
  assert.ok(stop);
  await sleep(20);
  assert.equal(gone, 0, 'same parent: nothing');
  ppid = 1;
  for (let i = 0; i < 100 && gone === 0; i++) await sleep(5);
  await sleep(20);
  assert.equal(gone, 1);
  stop();
});
