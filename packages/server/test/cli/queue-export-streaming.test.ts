/**
 * `queue export` streams (issue 21): it is what an operator runs to get events out after a failure,
 * so it must work for a queue far larger than the memory it may use, into a reader of any speed,
 * and end quietly when the reader stops early (`| head -1`), as `cat` does.
 *
 * The queue is generated cheaply: 1,000 segment rows of 1,000 small events each, written in one
 * transaction through the queue's own schema (openQueueDatabase). Each exported line repeats its
 * segment's header (data set id, key id, and here a long request id), so 1 M records stored in
 * ~80 MB export as ~860 MiB of NDJSON. The real binary exports them into a pipe that this test reads slowly (nothing
 * for the first 2 s, then with pauses); a preloaded module records the process's peak RSS at exit.
 * Assertions do not depend on timing: every line arrives, and the peak RSS stays under a bound far
 * below the output's size (without waiting for 'drain' the export holds everything the reader has
 * not taken yet).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { queueDbFile } from '../../src/config.js';
import { openQueueDatabase } from '../../src/queue/sqlite-queue-store.js';
import { viewDbFile } from '../../src/config.js';
import { SqliteQueueSource } from '../../src/consumer/sqlite-queue-source.js';
import { ViewConsumer } from '../../src/consumer/view-consumer.js';
import { SqliteViewStore } from '../../src/merged-view/sqlite-view-store.js';
import { BIN, cliJson, TEST_PROFILE, tempDataDir } from '../helpers/server-process.js';

const SEGMENTS = 1_000;
const EVENTS_PER_SEGMENT = 1_000;
const RECORDS = SEGMENTS * EVENTS_PER_SEGMENT;
/**
 * What the export may use beyond a CLI process that exports one record (measured in the same run,
 * so the Node version's baseline does not matter). Measured on Node 20: baseline 64 MiB, the full
 * export 150-190 MiB whatever the reader's speed (V8's young generation and garbage between major
 * collections; the high end on a loaded machine), to /dev/null as to a slow pipe. Without the wait
 * for 'drain' it grows with the output instead: 1,862 MiB for this export.
 */
const EXTRA_RSS_LIMIT = 224 * 1024 * 1024;

const skip = TEST_PROFILE === 'postgres' ? 'generates an embedded queue file' : false;

function generateQueue(dataDir: string, segments = SEGMENTS): void {
  const db = openQueueDatabase(queueDbFile(dataDir, 'production'));
  try {
    const dataSet = segments === SEGMENTS ? `export-${'d'.repeat(100)}` : 'merged';
    const insert = db.prepare(
      'INSERT INTO queue_segments (first_seq, event_count, received_at, data_set_id, key_id, request_id, policy_version, events, metas) VALUES (?, ?, ?, ?, ?, ?, 1, ?, NULL)',
    );
    db.transaction(() => {
      for (let s = 0; s < segments; s++) {
        const events: string[] = [];
        for (let i = 0; i < EVENTS_PER_SEGMENT; i++) events.push(`{"id":"e${s}-${i}","event_type":"purchase","timestamp":1700000000}`);
        const requestId = `${String(s).padStart(8, '0')}-${'r'.repeat(580)}`;
        insert.run(s * EVENTS_PER_SEGMENT + 1, EVENTS_PER_SEGMENT, 1_700_000_000_000 + s, dataSet, `key_${'f'.repeat(20)}`, requestId, `[${events.join(',')}]`);
      }
    })();
  } finally {
    db.close();
  }
}

test('queue export of 1 M records through a slow pipe: every line arrives, peak RSS far below the output', { skip, timeout: 300_000 }, async () => {
  const dataDir = tempDataDir('ecapi-export-');
  generateQueue(dataDir);
  const peakFile = join(dataDir, 'peak-rss');
  const preload = join(dataDir, 'peak-rss.mjs');
  writeFileSync(
    preload,
    `import { writeFileSync } from 'node:fs';\nprocess.on('exit', () => writeFileSync(${JSON.stringify(peakFile)}, String(process.resourceUsage().maxRSS * 1024)));\n`,
  );
  const env = { ...process.env, ECAPI_DATABASE_URL: '' };
  // The baseline: the same command exporting one record.
  const one = spawnSync(process.execPath, ['--import', preload, BIN, '--data-dir', dataDir, 'queue', 'export', '--from', String(RECORDS)], { encoding: 'utf8', env });
  assert.equal(one.status, 0, one.stderr);
  assert.equal(one.stdout.trim().split('\n').length, 1);
  const baseline = Number(readFileSync(peakFile, 'utf8'));

  // A 128 MiB old space as well: an export that held its output would die of heap exhaustion here, and
  // V8 (whose heap sizing differs between Node lines) collects garbage before the RSS bound is near.
  const child = spawn(process.execPath, ['--max-old-space-size=128', '--import', preload, BIN, '--data-dir', dataDir, 'queue', 'export'], { stdio: ['ignore', 'pipe', 'pipe'], env });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (t: string) => (stderr += t));
  const exited = once(child, 'exit') as Promise<[number | null, string | null]>;

  // The slow reader: nothing for 2 s (the export must wait, not buffer), then 8 MiB at a time with pauses.
  const stdout = child.stdout!;
  stdout.pause();
  await sleep(2_000);
  let bytes = 0;
  let lines = 0;
  let sinceBreak = 0;
  let firstLine = '';
  let lastLine = '';
  let tail = '';
  for await (const chunk of stdout as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) lines += 1;
    if (!firstLine) firstLine = chunk.subarray(0, Math.max(0, chunk.indexOf(10))).toString('utf8');
    tail = (tail + chunk.toString('utf8', Math.max(0, chunk.length - 4096))).slice(-4096);
    sinceBreak += chunk.length;
    if (sinceBreak >= 8 * 1024 * 1024) {
      sinceBreak = 0;
      await sleep(20);
    }
  }
  lastLine = tail.trimEnd().split('\n').pop()!;
  const [code] = await exited;
  assert.equal(code, 0, stderr);
  assert.equal(stderr, '');
  assert.equal(lines, RECORDS, 'every record was exported, one line each');
  assert.equal((JSON.parse(firstLine) as { seq: number }).seq, 1);
  assert.equal((JSON.parse(lastLine) as { seq: number; event: { id: string } }).seq, RECORDS);
  const peak = Number(readFileSync(peakFile, 'utf8'));
  const mib = (n: number) => `${(n / 2 ** 20).toFixed(0)} MiB`;
  console.log(`queue export: ${RECORDS} records, ${mib(bytes)} of NDJSON, peak RSS ${mib(peak)} (one record: ${mib(baseline)})`);
  assert.ok(bytes > 3.5 * EXTRA_RSS_LIMIT, `the export (${mib(bytes)}) is several times the memory it may use`);
  assert.ok(peak - baseline < EXTRA_RSS_LIMIT, `peak RSS ${mib(peak)} must stay within ${mib(EXTRA_RSS_LIMIT)} of ${mib(baseline)}`);

  // A reader that stops after one line: exit 0, nothing on stderr (no EPIPE stack trace).
  const head = spawnSync('bash', ['-c', 'set -o pipefail; "$0" "$1" --data-dir "$2" queue export 2>"$2/stderr" | head -1', process.execPath, BIN, dataDir], {
    encoding: 'utf8',
    env: { ...process.env, ECAPI_DATABASE_URL: '' },
  });
  assert.equal(head.status, 0, `queue export | head -1 exits 0: ${readFileSync(join(dataDir, 'stderr'), 'utf8')}`);
  assert.equal((JSON.parse(head.stdout.trim()) as { seq: number }).seq, 1);
  assert.equal(readFileSync(join(dataDir, 'stderr'), 'utf8'), '', 'nothing on stderr');
  rmSync(dataDir, { recursive: true, force: true }); // ~100 MB; kept when the test fails
});

test('events export | head -1: exit 0, nothing on stderr', { skip, timeout: 120_000 }, async () => {
  // 5,000 merged records (several pages, more than a pipe buffer), applied by the real consumer.
  const dataDir = tempDataDir('ecapi-events-export-');
  generateQueue(dataDir, 5);
  await cliJson(dataDir, ['data-set', 'create', 'merged']); // an unknown data set is an error (issue 18)
  const store = new SqliteViewStore(viewDbFile(dataDir, 'production'));
  const source = new SqliteQueueSource(queueDbFile(dataDir, 'production'));
  try {
    await new ViewConsumer(store, source, { batchSize: 5_000, mergeWindowMs: () => 7 * 86_400_000 }).drain();
  } finally {
    await source.close();
    await store.close();
  }
  const all = spawnSync(process.execPath, [BIN, '--data-dir', dataDir, 'events', 'export', '--data-set', 'merged'], { encoding: 'utf8', maxBuffer: 64 * 2 ** 20, env: { ...process.env, ECAPI_DATABASE_URL: '' } });
  assert.equal(all.status, 0, all.stderr);
  assert.equal(all.stdout.trim().split('\n').length, 5_000);
  const head = spawnSync('bash', ['-c', 'set -o pipefail; "$0" "$1" --data-dir "$2" events export --data-set merged 2>"$2/stderr" | head -1', process.execPath, BIN, dataDir], {
    encoding: 'utf8',
    env: { ...process.env, ECAPI_DATABASE_URL: '' },
  });
  assert.equal(head.status, 0, `events export | head -1 exits 0: ${readFileSync(join(dataDir, 'stderr'), 'utf8')}`);
  assert.equal(head.stdout.trim().split('\n').length, 1);
  assert.equal(readFileSync(join(dataDir, 'stderr'), 'utf8'), '', 'nothing on stderr');
});
