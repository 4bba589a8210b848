/**
 * Power loss at any moment (issue 21): every file and directory the service creates in its data dir
 * is durable before it is relied on. A power cut keeps only what was fsynced: a file's data needs an
 * fsync of the file, and a new directory entry (mkdir, create, rename, link) needs an fsync of its
 * PARENT directory (ext4, xfs). A simulator that drops unsynced data cannot show the directory
 * cases; a system-call trace can.
 *
 * A new operator's first steps each run under `strace -f -yy` on a data dir that does not exist yet:
 * `data-set create`, `key create`, `key rotate`, then `serve --workers 2 --no-worker` until
 * single events (so that each serving process has committed once: SQLite fsyncs the directory on a
 * connection's first commit, which could hide a missing fsync of ours) and a 100-event batch (over
 * the body log's 32 KiB) have been answered 200, then SIGTERM. For every entry that did not exist
 * before the command and exists after it, the trace must show:
 *   (a) a regular file: its data fsynced (fsync/fdatasync) after its last write, and
 *   (b) its parent directory fsynced after the entry was created,
 * both completed before the command exited, or, for the serve command, before the first 200 sent
 * after the entry was created (what is created before an acknowledgement is what a restart needs to
 * find it: the data dir tree, the queue files, the body log, the TLS files).
 * Exempt: SQLite's `-shm` (shared memory for the WAL index, rebuilt from the WAL on recovery, never
 * synced by SQLite) and temporary files removed before the command exited (never checked: they are
 * gone). SQLite database files (`*.db`) must be synced at least once after creation (their later
 * writes are checkpoints, which SQLite syncs before it drops the WAL frames they copy). `view.db` and
 * `ingest-stats.db` with their WAL are derived data the serve command writes after acknowledgements
 * (synchronous=NORMAL by design: the merged view is rebuilt from the queue), so their deadline is the
 * process's exit.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { BIN, TEST_PROFILE } from '../helpers/server-process.js';
import { descendants } from '../helpers/fault-tools.js';
import { sampleEvent } from '../helpers/https-client.js';
import {
  checkDurability,
  entriesUnder,
  listTree,
  modelTrace,
  postSignedOnOwnConnection,
  responseLine,
  STRACE_DURABILITY_SYSCALLS,
  straceUsable,
  type EntryRule,
} from '../helpers/strace-durability.js';

const skip = TEST_PROFILE === 'postgres'
  ? 'the embedded profile\'s files'
  : straceUsable() ? false : 'strace is not installed or ptrace is not permitted';

function rule(path: string): EntryRule {
  if (path.endsWith('-shm')) return { exempt: 'SQLite shared-memory WAL index: rebuilt from the WAL on recovery, never synced by SQLite' };
  if (path.endsWith('.db')) return { data: 'once' };
  return { data: 'strict' };
}

/** Derived data written by serve after acknowledgements: durable by the process's exit. */
const derived = (path: string) => /\/(view|ingest-stats)\.db(-wal)?$/.test(path);

function strace(traceFile: string, args: string[]) {
  return spawn('strace', ['-f', '-yy', '-tt', '-s', '0', '-e', `trace=${STRACE_DURABILITY_SYSCALLS}`, '-o', traceFile, process.execPath, BIN, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ECAPI_MASTER_KEY: '', ECAPI_MASTER_KEY_FILE: '', ECAPI_DATABASE_URL: '', ECAPI_LOG_LEVEL: 'info' },
  });
}

async function traced(traceFile: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = strace(traceFile, args);
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (t: string) => (stdout += t));
  child.stderr!.setEncoding('utf8').on('data', (t: string) => (stderr += t));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}

test('power loss: every entry the first steps create in the data dir is fsynced, and so is its parent, before it is relied on', { skip, timeout: 180_000 }, async () => {
  const base = mkdtempSync(join(tmpdir(), 'ecapi-powerloss-'));
  const dataDir = join(base, 'data'); // does not exist yet: the first command creates it
  const problems: string[] = [];
  const exemptions = new Set<string>();
  let checkedCount = 0;
  const traceFiles: string[] = [];

  const cliStep = async (label: string, args: string[]) => {
    const before = new Set(listTree(base).keys());
    const traceFile = join(tmpdir(), `${basename(base)}-${label.replace(/\W+/g, '-')}.strace`);
    traceFiles.push(traceFile);
    const result = await traced(traceFile, ['--data-dir', dataDir, '--json', ...args]);
    assert.equal(result.code, 0, `${label}: ${result.stderr}`);
    const model = modelTrace(readFileSync(traceFile, 'utf8'), before);
    const entries = entriesUnder(model, dataDir);
    assert.deepEqual(
      entries.map((e) => e.path).sort(),
      [...listTree(dataDir).keys()].filter((p) => !before.has(p)).sort(),
      `${label}: the trace shows the creation of exactly the new entries`,
    );
    const report = checkDurability(model, { entries, deadline: () => model.lastLine, rule, label });
    problems.push(...report.problems);
    report.exempt.forEach((e) => exemptions.add(e.replace(dataDir, '<data>')));
    checkedCount += report.checked.length;
    return JSON.parse(result.stdout) as Record<string, any>;
  };

  await cliStep('data-set create', ['data-set', 'create', 'powerloss']);
  const key = await cliStep('key create', ['key', 'create', '--data-set', 'powerloss']);
  const rotated = await cliStep('key rotate', ['key', 'rotate', key.key_id, '--grace', '1h']);
  const secret = rotated.secret as string;

  // serve, two serving processes, until a few single events and a batch are answered. Without the
  // consumer: its start-up and commits fsync the environment's directory at moments of their own,
  // which could cover for a missing fsync on the acknowledgement path.
  const before = new Set(listTree(base).keys());
  const traceFile = join(tmpdir(), `${basename(base)}-serve.strace`);
  traceFiles.push(traceFile);
  const child = strace(traceFile, ['--data-dir', dataDir, 'serve', '--port', '0', '--admin-port', '0', '--no-demo', '--workers', '2', '--no-worker']);
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (t: string) => (output += t));
  child.stderr!.setEncoding('utf8').on('data', (t: string) => (output += t));
  const clientPorts: number[] = [];
  try {
    const port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`server did not start under strace:\n${output}`)), 60_000);
      const onData = () => {
        const line = output.split('\n').find((l) => l.includes('"ecapi-ingest listening"'));
        if (line) {
          clearTimeout(timer);
          child.stdout!.off('data', onData);
          resolve((JSON.parse(line) as { port: number }).port);
        }
      };
      child.stdout!.on('data', onData);
      child.once('exit', (code) => reject(new Error(`serve exited with ${code}:\n${output}`)));
    });
    const ca = readFileSync(join(dataDir, 'tls', 'localhost-cert.pem'), 'utf8');
    const send = (body: string) => postSignedOnOwnConnection(port, ca, { keyId: key.key_id, secret }, 'powerloss', body);
    // Single events first, one connection each: the node's two serving processes each commit.
    for (let i = 0; i < 6; i++) {
      const answer = await send(JSON.stringify(sampleEvent('powerloss', { id: `single-${i}` })));
      assert.equal(answer.status, 200, answer.text);
      clientPorts.push(answer.localPort);
    }
    const batch = Array.from({ length: 100 }, (_, i) => sampleEvent('powerloss', { id: `batch-${i}`, properties: { note: 'n'.repeat(300) } }));
    const body = JSON.stringify({ events: batch });
    assert.ok(Buffer.byteLength(body) > 32 * 1024, 'the batch goes to the body log');
    const answer = await send(body);
    assert.equal(answer.status, 200, answer.text);
    clientPorts.push(answer.localPort);

    // strace relays no signal: stop the node's primary, then read the whole trace.
    process.kill(descendants(child.pid!)[0]!, 'SIGTERM');
    const [code] = (await once(child, 'exit')) as [number | null];
    assert.equal(code, 0, output);
  } finally {
    if (child.exitCode === null && child.signalCode === null) {
      for (const pid of descendants(child.pid!)) process.kill(pid, 'SIGKILL');
      child.kill('SIGKILL');
    }
  }
  const after = listTree(dataDir);
  const model = modelTrace(readFileSync(traceFile, 'utf8'), before);
  const responses = clientPorts.map((p) => responseLine(model, p)).sort((a, b) => a - b);
  // What exists at the end, and what existed when a 200 was sent (the WAL files are gone after a clean stop).
  const entries = entriesUnder(model, dataDir, responses);
  const report = checkDurability(model, {
    entries,
    rule,
    label: 'serve',
    // Before the first 200 sent after the entry appeared; derived data (and anything created after
    // the last 200) by the exit.
    deadline: (path, createdAt) => (derived(path) ? model.lastLine : responses.find((r) => r > createdAt) ?? model.lastLine),
  });
  problems.push(...report.problems);
  report.exempt.forEach((e) => exemptions.add(e.replace(dataDir, '<data>')));
  checkedCount += report.checked.length;
  const bodyLog = [...after.keys()].filter((p) => p.includes('queue.db-bodies'));
  assert.ok(bodyLog.length >= 2 && report.checked.some((p) => p.endsWith('queue.db-bodies')), 'the body log directory and a log file were created by serve and checked');
  assert.ok(report.checked.some((p) => p.endsWith('localhost-key.pem')), 'the TLS key was created by serve and checked');
  assert.ok(report.checked.some((p) => p.endsWith('queue.db-wal')), 'the queue\'s WAL, as it was when a 200 was sent, was checked');

  console.log(`checked ${checkedCount} entries; exempt:\n  ${[...exemptions].join('\n  ')}`);
  assert.deepEqual(problems, [], `not durable when relied on:\n${problems.join('\n')}`);
  for (const file of traceFiles) rmSync(file, { force: true }); // kept when the test fails
});
