/**
 * Bytes of the body log that no committed row points at do not stay (issue: an audit found them
 * kept forever): a commit that failed after its bodies were written, and a writer killed between
 * its append and its COMMIT, left identifiers and event ids in `queue.db-bodies/` that no erasure
 * would ever reach (docs/guides/data-lifecycle.md, "When the bytes are gone").
 *
 * Real failures, no mocks: an INSERT that SQLite itself aborts after the append (a trigger on the
 * test's own queue file: the transaction fails after its bodies are in the log, as a commit on a
 * full disk does, but on any machine), a real full disk (a small tmpfs, as
 * test/reliability/storage-faults.test.ts: a body cut short by ENOSPC, and a body wholly logged
 * whose commit then fails with SQLITE_FULL; needs root, skipped otherwise), and a real SIGKILL of
 * a process right after its append.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statfsSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { BodyLogWriter, bodyLogDir, bodyLogFile, readLoggedBody } from '../../src/queue/sqlite-body-log.js';
import { SqliteEventQueue } from '../../src/queue/sqlite-event-queue.js';
import { openQueueDatabase } from '../../src/queue/sqlite-queue-store.js';
import { tempDataDir } from '../helpers/server-process.js';
import { canMount } from '../helpers/fault-tools.js';

const bigEvent = (id: string, pad: number, email = 'someone@example.com') => ({
  data_set_id: 'ds', id, timestamp: 1_700_000_000, event_type: 'purchase', user: { email }, ext: { pad: 'p'.repeat(pad) },
});
const appendOf = (event: Record<string, unknown>, requestId: string) => ({
  requestId, keyId: 'key_test', dataSetId: 'ds', receivedAt: 1_700_000_000_000, policyVersion: 1, mergeWindowMs: 604_800_000,
  events: [event], metas: [undefined], rawBody: Buffer.from(JSON.stringify(event)),
});
const bodyLength = (event: Record<string, unknown>) => Buffer.byteLength(JSON.stringify(event));

/** Every regular file under `dir` that contains `marker`. */
function filesContaining(dir: string, marker: string): string[] {
  const needle = Buffer.from(marker);
  const found: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    if (readFileSync(path).includes(needle)) found.push(path);
  }
  return found;
}

function logHead(file: string): { fileNo: number; endOffset: number } {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare('SELECT file_no AS fileNo, end_offset AS endOffset FROM queue_log_head').get() as { fileNo: number; endOffset: number };
  } finally {
    db.close();
  }
}

/** Sizes of the log files by number. */
function logSizes(file: string): Record<number, number> {
  const dir = bodyLogDir(file);
  const sizes: Record<number, number> = {};
  for (const name of readdirSync(dir)) sizes[Number(name.slice(0, 8))] = statSync(join(dir, name)).size;
  return sizes;
}

/** A queue file whose INSERTs of requests named `doomed…` SQLite aborts: after the group's bodies are logged. */
function queueFileWithDoomedRequests(): string {
  const file = join(tempDataDir('ecapi-bodylog-garbage-'), 'queue.db');
  const db = openQueueDatabase(file);
  db.exec(`CREATE TRIGGER doomed BEFORE INSERT ON queue_segments WHEN NEW.request_id LIKE 'doomed%' BEGIN SELECT RAISE(ABORT, 'doomed request'); END`);
  db.close();
  return file;
}

test('a commit that fails after its body was logged leaves none of its bytes; the next body goes at the committed end', async () => {
  const file = queueFileWithDoomedRequests();
  const queue = new SqliteEventQueue(file);
  try {
    const kept = bigEvent('kept-1', 40_000);
    const first = await queue.append(appendOf(kept, 'r1'));
    const doomed = bigEvent('doomed-1', 237_000, 'forget-me@example.com');
    await assert.rejects(queue.append(appendOf(doomed, 'doomed-1')), /doomed request/);
    assert.deepEqual(logHead(file), { fileNo: 1, endOffset: bodyLength(kept) });
    assert.deepEqual(logSizes(file), { 1: bodyLength(kept) }, 'the log ends where the committed rows end');
    assert.deepEqual(filesContaining(join(file, '..'), 'forget-me@example.com'), [], 'no byte of the failed request is left in the data dir');

    const next = bigEvent('kept-2', 50_000);
    const second = await queue.append(appendOf(next, 'r3'));
    const records = await queue.read({ fromSeq: first.firstSeq, limit: 10 });
    assert.deepEqual(records.map((r) => r.event), [kept, next]);
    assert.equal(second.firstSeq, first.firstSeq + 1);
    assert.deepEqual(logSizes(file), { 1: bodyLength(kept) + bodyLength(next) });
  } finally {
    await queue.close();
  }
});

test('a failed group that rolled over to new log files: the first is cut back to the committed end, the new ones to nothing', async () => {
  const file = queueFileWithDoomedRequests();
  const queue = new SqliteEventQueue(file, undefined, { bodyLogFileBytes: 100_000 });
  try {
    const kept = bigEvent('kept-1', 40_000);
    await queue.append(appendOf(kept, 'r1'));
    // One turn of the event loop: one message to the writer, one group, spanning files 1, 2 and 3.
    const group = [
      bigEvent('doomed-a', 45_000, 'forget-a@example.com'), // file 1, after `kept`
      bigEvent('doomed-b', 120_000, 'forget-b@example.com'), // file 2, alone (larger than a file)
      bigEvent('doomed-c', 40_000, 'forget-c@example.com'), // file 3
    ];
    const results = await Promise.allSettled(group.map((event) => queue.append(appendOf(event, event.id))));
    assert.deepEqual(results.map((r) => r.status), ['rejected', 'rejected', 'rejected']);
    assert.deepEqual(logHead(file), { fileNo: 1, endOffset: bodyLength(kept) });
    // Files 2 and 3 exist (the group did roll over) and hold nothing.
    assert.deepEqual(logSizes(file), { 1: bodyLength(kept), 2: 0, 3: 0 });
    for (const email of ['forget-a@example.com', 'forget-b@example.com', 'forget-c@example.com']) {
      assert.deepEqual(filesContaining(join(file, '..'), email), [], `no byte of ${email}'s request is left`);
    }

    // Later commits take the same files again, from the committed end: offsets stay right.
    const next = [bigEvent('kept-2', 70_000), bigEvent('kept-3', 35_000)];
    for (const [i, event] of next.entries()) await queue.append(appendOf(event, `r${i + 2}`));
    assert.deepEqual((await queue.read({ fromSeq: 1, limit: 10 })).map((r) => r.event), [kept, ...next]);
    assert.deepEqual(logSizes(file), { 1: bodyLength(kept), 2: bodyLength(next[0]!), 3: bodyLength(next[1]!) });
  } finally {
    await queue.close();
  }
});

// A process that does what the writer thread does up to its COMMIT, then is killed: SIGKILL,
// nothing of it runs after the append. Its group rolls over from file 1 to file 2.
const KILLED_WRITER = `
const { openQueueDatabase } = await import(process.argv[1]);
const { BodyLogWriter, bodyLogDir } = await import(process.argv[2]);
const file = process.argv[3];
const db = openQueueDatabase(file);
db.exec('BEGIN IMMEDIATE');
const head = db.prepare('SELECT file_no AS fileNo, end_offset AS endOffset FROM queue_log_head').get();
const event = (id, email, pad) => Buffer.from(JSON.stringify({ data_set_id: 'ds', id, timestamp: 1700000000, event_type: 'purchase', user: { email }, ext: { pad: 'p'.repeat(pad) } }));
const written = new BodyLogWriter(bodyLogDir(file), { fileBytes: 100000 }).append(head, [event('killed-a', 'killed-a@example.com', 50000), event('killed-b', 'killed-b@example.com', 60000)]);
db.prepare('UPDATE queue_log_head SET file_no = ?, end_offset = ? WHERE id = 1').run(written.head.fileNo, written.head.endOffset);
process.kill(process.pid, 'SIGKILL');
`;

test('a writer killed between its append and its COMMIT: the next writer to start cuts its bytes off before taking a request', async () => {
  const file = join(tempDataDir('ecapi-bodylog-garbage-'), 'queue.db');
  let queue = new SqliteEventQueue(file, undefined, { bodyLogFileBytes: 100_000 });
  const kept = bigEvent('kept-1', 40_000);
  try {
    await queue.append(appendOf(kept, 'r1'));
  } finally {
    await queue.close();
  }
  const module = (path: string) => fileURLToPath(new URL(path, import.meta.url));
  const killed = spawnSync(process.execPath, ['--input-type=module', '-e', KILLED_WRITER, module('../../src/queue/sqlite-queue-store.js'), module('../../src/queue/sqlite-body-log.js'), file], { encoding: 'utf8' });
  assert.equal(killed.signal, 'SIGKILL', killed.stderr);
  // What the killed process left: its bodies past the committed end, in file 1 and in a new file 2.
  assert.deepEqual(logHead(file), { fileNo: 1, endOffset: bodyLength(kept) });
  assert.ok(logSizes(file)[1]! > bodyLength(kept) && logSizes(file)[2]! > 0, 'the killed writer had appended past the committed end');

  queue = new SqliteEventQueue(file, undefined, { bodyLogFileBytes: 100_000 });
  try {
    // Any request answered means the writer started: it cut the log before taking it.
    const small = { data_set_id: 'ds', id: 'small-1', timestamp: 1_700_000_000, event_type: 'purchase' };
    await queue.append(appendOf(small, 'r2'));
    assert.deepEqual(logSizes(file), { 1: bodyLength(kept), 2: 0 });
    for (const email of ['killed-a@example.com', 'killed-b@example.com']) {
      assert.deepEqual(filesContaining(join(file, '..'), email), [], `no byte of ${email}'s body is left`);
    }
    const next = bigEvent('kept-2', 35_000);
    await queue.append(appendOf(next, 'r3'));
    assert.deepEqual((await queue.read({ fromSeq: 1, limit: 10 })).map((r) => r.event), [kept, small, next]);
  } finally {
    await queue.close();
  }
});

test('BodyLogWriter.trimTo cuts the head file to its end and later files to nothing', () => {
  const dir = join(tempDataDir('ecapi-bodylog-'), 'log');
  const log = new BodyLogWriter(dir, { fileBytes: 100 });
  try {
    const committed = log.append({ fileNo: 1, endOffset: 0 }, [Buffer.alloc(30, 1)]).head;
    log.append(committed, [Buffer.alloc(50, 2), Buffer.alloc(90, 3), Buffer.alloc(20, 4)]); // files 1, 2, 3: never committed
    assert.equal(log.trimTo(committed), 50 + 90 + 20);
    assert.deepEqual([1, 2, 3].map((n) => statSync(bodyLogFile(dir, n)).size), [30, 0, 0]);
    assert.equal(log.trimTo(committed), 0, 'nothing more to cut');
    assert.deepEqual(readLoggedBody(dir, { fileNo: 1, offset: 0, length: 30 }), Buffer.alloc(30, 1));
  } finally {
    log.close();
  }
});

test('BodyLogWriter.append cuts what lies past where it starts a file: garbage cannot end up below the committed end', () => {
  const dir = join(tempDataDir('ecapi-bodylog-'), 'log');
  const log = new BodyLogWriter(dir, { fileBytes: 100 });
  try {
    const committed = log.append({ fileNo: 1, endOffset: 0 }, [Buffer.alloc(30, 1)]).head;
    // Garbage left past the committed end by someone else (another process's writer, killed): the
    // next append from the committed end removes it, also in a file it rolls over into.
    const other = new BodyLogWriter(dir, { fileBytes: 100 });
    other.append(committed, [Buffer.alloc(60, 5), Buffer.alloc(80, 6)]);
    other.close();
    const written = log.append(committed, [Buffer.alloc(10, 7), Buffer.alloc(70, 8)]);
    assert.deepEqual(written.head, { fileNo: 2, endOffset: 70 });
    assert.deepEqual([1, 2].map((n) => readFileSync(bodyLogFile(dir, n))), [
      Buffer.concat([Buffer.alloc(30, 1), Buffer.alloc(10, 7)]),
      Buffer.alloc(70, 8),
    ]);
  } finally {
    log.close();
  }
});

// ---- A real full disk ----------------------------------------------------------------------------

const probeDir = mkdtempSync(join(tmpdir(), 'ecapi-bodylog-tmpfs-'));
const mountable = canMount(probeDir);
rmSync(probeDir, { recursive: true, force: true });
const tmpfsSkip = mountable ? false : 'mounting a tmpfs is not permitted here (needs root with CAP_SYS_ADMIN)';

/** Runs `body` with a fresh 8 MiB tmpfs mounted at its argument, then unmounts it. */
async function onSmallTmpfs(body: (dir: string) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'ecapi-bodylog-tmpfs-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=8m', 'tmpfs', dir]);
  try {
    await body(dir);
  } finally {
    try {
      execFileSync('umount', [dir]);
    } catch {
      execFileSync('umount', ['-l', dir]);
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Fills `dir`'s file system until exactly `pages` pages are free. */
function fillLeaving(dir: string, pages: number): string {
  const filler = join(dir, 'filler');
  const s = statfsSync(dir);
  const fd = openSync(filler, 'w');
  try {
    writeSync(fd, Buffer.alloc((s.bavail - pages) * s.bsize, 0x61));
  } finally {
    closeSync(fd);
  }
  assert.equal(statfsSync(dir).bavail, pages);
  return filler;
}

test('a full disk: the part of a body that landed before ENOSPC is cut off; once there is room the body log goes on from the committed end', { skip: tmpfsSkip }, async () => {
  await onSmallTmpfs(async (dir) => {
    const file = join(dir, 'queue.db');
    const queue = new SqliteEventQueue(file);
    try {
      const kept = bigEvent('kept-1', 40_000);
      await queue.append(appendOf(kept, 'r1'));
      // 16 pages free: a ~237 KB request lands partly in the log, then the write fails (ENOSPC).
      const filler = fillLeaving(dir, 16);
      const doomed = bigEvent('full-1', 237_000, 'forget-me@example.com');
      await assert.rejects(queue.append(appendOf(doomed, 'r2')));
      assert.deepEqual(logHead(file), { fileNo: 1, endOffset: bodyLength(kept) });
      assert.deepEqual(logSizes(file), { 1: bodyLength(kept) });
      assert.deepEqual(filesContaining(dir, 'forget-me@example.com'), [], 'no byte of the refused request is left');

      unlinkSync(filler);
      const retried = await queue.append(appendOf(doomed, 'r3'));
      assert.deepEqual((await queue.read({ fromSeq: 1, limit: 10 })).map((r) => r.event), [kept, doomed]);
      assert.equal(retried.firstSeq, 2);
      assert.deepEqual(logSizes(file), { 1: bodyLength(kept) + bodyLength(doomed) });
    } finally {
      await queue.close();
    }
  });
});

test('a full disk: the whole body is in the log and synced, then the commit fails with SQLITE_FULL: its bytes are cut off', { skip: tmpfsSkip }, async () => {
  await onSmallTmpfs(async (dir) => {
    const file = join(dir, 'queue.db');
    const queue = new SqliteEventQueue(file);
    // A reader that holds its snapshot from before the first commit: no checkpoint can let the
    // writer start the WAL over, so every commit must grow it.
    const reader = new Database(file, { readonly: true });
    try {
      reader.prepare('BEGIN').run();
      reader.prepare('SELECT count(*) FROM queue_segments').get();
      const kept = bigEvent('kept-1', 40_000);
      await queue.append(appendOf(kept, 'r1'));
      // Exactly the pages the next body needs in the log: it fits, the WAL cannot grow.
      const doomed = bigEvent('full-1', 237_000, 'forget-me@example.com');
      const page = statfsSync(dir).bsize;
      const filler = fillLeaving(dir, Math.ceil((bodyLength(kept) + bodyLength(doomed)) / page) - Math.ceil(bodyLength(kept) / page));
      await assert.rejects(queue.append(appendOf(doomed, 'r2')), /database or disk is full/);
      assert.deepEqual(logHead(file), { fileNo: 1, endOffset: bodyLength(kept) });
      assert.deepEqual(logSizes(file), { 1: bodyLength(kept) });
      assert.deepEqual(filesContaining(dir, 'forget-me@example.com'), [], 'no byte of the refused request is left');

      reader.prepare('COMMIT').run();
      unlinkSync(filler);
      await queue.append(appendOf(doomed, 'r3'));
      assert.deepEqual((await queue.read({ fromSeq: 1, limit: 10 })).map((r) => r.event), [kept, doomed]);
      assert.deepEqual(logSizes(file), { 1: bodyLength(kept) + bodyLength(doomed) });
    } finally {
      reader.close();
      await queue.close();
    }
  });
});
