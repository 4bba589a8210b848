/**
 * On a full disk the CLI says what is wrong (issue 29, point 5c), against a real server whose data
 * dir is on a small tmpfs that ingestion fills up (a real ENOSPC / SQLITE_FULL): `worker status`
 * reports the consumer alive but stalled and the disk full (it used to say "not running"), and
 * `identities forget` fails with one line naming the full disk (it used to print "Cannot read
 * properties of null (reading 'state')", its request silently not stored). Needs root to mount the
 * tmpfs; skipped otherwise.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cli, cliJson, provision, startServer, TEST_PROFILE } from '../helpers/server-process.js';
import { postSigned, sampleEvent } from '../helpers/https-client.js';
import { waitFor } from '../helpers/fault-tools.js';

const skip =
  TEST_PROFILE !== 'sqlite' ? 'the embedded profile\'s data dir is what fills up'
    : process.getuid?.() !== 0 ? 'needs root to mount a tmpfs'
      : false;

test('a full disk: worker status says the consumer is alive but stalled on it; identities forget says the disk is full', { skip, timeout: 180_000 }, async (t) => {
  const mountPoint = mkdtempSync(join(tmpdir(), 'ecapi-full-'));
  const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=48m', 'tmpfs', mountPoint], { encoding: 'utf8' });
  if (mounted.status !== 0) return t.skip(`cannot mount a tmpfs here: ${mounted.stderr.trim()}`);
  const dataDir = join(mountPoint, 'data');
  let server: Awaited<ReturnType<typeof startServer>> | null = null;
  let paused: number | null = null;
  try {
    const creds = await provision(dataDir, ['shop']);
    server = await startServer({ dataDir, args: ['--workers', '1'] });
    const free = () => {
      const s = statfsSync(mountPoint);
      return s.bavail * s.bsize;
    };
    // The consumer is paused (SIGSTOP) while the disk fills, so that it has events left to apply
    // when the disk is full: left running, it may apply everything before the queue's last write
    // fails, and then it is idle, not stalled (a race this test lost once).
    const consumer = await waitFor('the consumer to run', async () => {
      const s = await cliJson(dataDir, ['worker', 'status']);
      return s.running && Number.isInteger(s.pid) ? (s.pid as number) : undefined;
    }, 60_000, 200);
    process.kill(consumer, 'SIGSTOP');
    paused = consumer;
    // Leave 3 MiB free, then ingest until the queue cannot store any more (500).
    execFileSync('dd', ['if=/dev/zero', `of=${join(mountPoint, 'filler')}`, 'bs=1M', `count=${Math.floor(free() / 1048576) - 3}`], { stdio: 'ignore' });
    let refused = 0;
    for (let i = 0; i < 1000 && refused < 5; i++) {
      const events = Array.from({ length: 50 }, (_, j) => sampleEvent('shop', { id: `e-${i}-${j}`, properties: { pad: 'x'.repeat(1000) } }));
      const r = await postSigned(server.port, server.ca, creds, 'shop', JSON.stringify({ events }));
      if (r.status !== 200) refused++;
    }
    assert.ok(refused > 0, 'the disk filled up: ingestion answered 500');
    process.kill(consumer, 'SIGCONT');
    paused = null;

    await waitFor('worker status to see the stalled consumer', async () => {
      const s = await cliJson(dataDir, ['worker', 'status']);
      return s.stalled ? s : undefined;
    }, 60_000, 1000);
    // The service may have freed a little meanwhile (a WAL cut by the worker's start-up scrub, which
    // the SIGSTOP interrupted: fs/old-copies-schedule.ts), which is good, but this test is about a
    // full disk: fill what is left.
    spawnSync('dd', ['if=/dev/zero', `of=${join(mountPoint, 'filler-rest')}`, 'bs=4k'], { stdio: 'ignore' });
    const status = await cliJson(dataDir, ['worker', 'status']);
    assert.equal(status.stalled, true);
    assert.equal(status.running, true, 'the consumer process is alive: it is not "not running"');
    assert.ok(Number.isInteger(status.pid) && status.pid > 0);
    assert.match(status.problem, /it cannot write to the view: the data dir's disk is full \(\d+(\.\d)? ?\w* free on /);
    const text = await cli(dataDir, ['worker', 'status']);
    assert.equal(text.code, 0);
    assert.match(text.stdout, new RegExp(`^consumer merged-view: running \\(pid ${status.pid}\\) but stalled\\n`));
    assert.match(text.stdout, /\nproblem: its heartbeat stopped \d+ s ago: it cannot write to the view: the data dir's disk is full/);

    const forget = await cli(dataDir, ['identities', 'forget', 'shop', '--identifier', `email:${'a'.repeat(64)}`, '--wait', '2s']);
    assert.equal(forget.code, 1);
    assert.equal(forget.stdout, '');
    assert.match(forget.stderr, new RegExp(`^error: cannot write to the data dir ${dataDir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: the disk is full \\(database or disk is full\\); free space on that file system and run the command again\\n$`));
  } finally {
    if (paused !== null) process.kill(paused, 'SIGCONT');
    if (server) await server.stop();
    spawnSync('umount', [mountPoint]);
    rmSync(mountPoint, { recursive: true, force: true });
  }
});
