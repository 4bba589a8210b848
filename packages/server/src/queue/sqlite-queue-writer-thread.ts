/**
 * The queue's writer thread. better-sqlite3 is synchronous and a FULL-sync commit waits for the
 * disk, so commits run here, never on the thread that serves requests.
 *
 * Group commit happens here: the serving thread posts every request the moment it is ready, and
 * each time this thread wakes it drains everything already waiting on its port (up to
 * MAX_EVENTS_PER_COMMIT events, checked per request: one commit never exceeds it) into one
 * IMMEDIATE transaction and one sync. While a commit syncs,
 * the next group queues up. A commit therefore never waits for the serving thread to notice the
 * previous reply: at load the writer runs commit after commit, and at low load a lone request is
 * committed at once.
 *
 * Sequence numbers are taken inside the transaction, from the table itself, so several processes
 * appending to one file (serve --workers N) never collide.
 *
 * A commit that fails after its group's bodies went to the body log leaves bytes no row points at
 * (identifiers, event ids that no erasure would ever reach). After the ROLLBACK this thread takes
 * the write lock again, reads the committed end (`queue_log_head`) and cuts the log back to it
 * (`trimBodyLog`); it does the same once at start, for a writer killed between its append and its
 * COMMIT. The committed end is read afresh under the lock rather than remembered: after a failed
 * COMMIT SQLite may already have rolled back and released the lock, and another process may have
 * committed past our bytes meanwhile. A successful commit does no I/O for any of this.
 */
import { parentPort, receiveMessageOnPort, workerData } from 'node:worker_threads';
import { openQueueDatabase } from './sqlite-queue-store.js';
import { BODY_LOG_MIN_BYTES, BodyLogWriter, bodyLogDir, type BodyLocation, type BodyLogHead } from './sqlite-body-log.js';
import type { WriterMessage, WriterReply, WriterRequest } from './sqlite-queue-writer-protocol.js';

/** Upper bound of events per commit, so one group never holds an unbounded transaction. */
const MAX_EVENTS_PER_COMMIT = 20_000;

const port = parentPort!;
const { file, bodyLogFileBytes } = workerData as { file: string; bodyLogFileBytes?: number };
const db = openQueueDatabase(file);
const bodyLog = new BodyLogWriter(bodyLogDir(file), bodyLogFileBytes !== undefined ? { fileBytes: bodyLogFileBytes } : {});
// Checkpoints run on their own thread (sqlite-queue-checkpointer-thread.ts), never inside a commit.
db.pragma('wal_autocheckpoint = 0');
const nextSeq = db.prepare('SELECT first_seq + event_count AS next FROM queue_segments ORDER BY first_seq DESC LIMIT 1');
const insert = db.prepare(
  `INSERT INTO queue_segments (first_seq, event_count, received_at, data_set_id, key_id, request_id, policy_version, merge_window_ms, events, metas, body_file, body_offset, body_length)
   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
);
// Accepted events per data set and hour, in the same transaction as the segments (sqlite-queue-store.ts).
const addAccepted = db.prepare(
  'INSERT INTO queue_accepted (data_set_id, hour, n) VALUES (?, ?, ?) ON CONFLICT (data_set_id, hour) DO UPDATE SET n = n + excluded.n',
);
const HOUR_MS = 3_600_000;
const logHead = db.prepare('SELECT file_no AS fileNo, end_offset AS endOffset FROM queue_log_head WHERE id = 1');
const setLogHead = db.prepare('UPDATE queue_log_head SET file_no = ?, end_offset = ? WHERE id = 1');
const begin = db.prepare('BEGIN IMMEDIATE');
// Several processes (serve --workers N) append to one file, and a commit holds the write lock for
// about one sync. SQLite's own busy handler sleeps 1, 2, 5, 10... ms between attempts: a writer
// that found the lock taken lost several of the other's commit times, and two processes were
// slower than one. This thread polls instead, from 50 µs up to 2 ms, for up to BUSY_TIMEOUT_MS.
db.pragma('busy_timeout = 0');
const BUSY_TIMEOUT_MS = 5000;
const pause = new Int32Array(new SharedArrayBuffer(4));

function beginImmediate(): void {
  const deadline = performance.now() + BUSY_TIMEOUT_MS;
  for (let waitMs = 0.05; ; waitMs = Math.min(waitMs * 2, 2)) {
    try {
      begin.run();
      return;
    } catch (error) {
      if (!String((error as { code?: string }).code).startsWith('SQLITE_BUSY') || performance.now() >= deadline) throw error;
      Atomics.wait(pause, 0, 0, waitMs);
    }
  }
}
const commit = db.prepare('COMMIT');
const NO_BYTES = Buffer.alloc(0);

const isLogged = (events: string | Uint8Array): events is Uint8Array => typeof events !== 'string' && events.byteLength >= BODY_LOG_MIN_BYTES;

/** The body log still holds bytes past its committed end: a cut failed or could not take the lock. */
let trimPending = false;

/** Inside a write transaction: cuts the body log back to the end this transaction reads as committed. */
function trimInTransaction(): void {
  try {
    bodyLog.trimTo(logHead.get() as BodyLogHead);
    trimPending = false;
  } catch {
    trimPending = true; // tried again at the start of the next commit
  }
}

/**
 * Cuts the body log back to its committed end in a transaction of its own (the write lock, so no
 * other process is between an append and its commit). After a failed commit and at start; if the
 * lock cannot be had, the next commit does it first.
 */
function trimBodyLog(): void {
  try {
    beginImmediate();
  } catch {
    trimPending = true;
    return;
  }
  trimInTransaction(); // never throws
  try {
    db.exec('ROLLBACK'); // it wrote nothing
  } catch {
    // The next BEGIN IMMEDIATE reports what is wrong with the connection, as a failed commit.
  }
}

/**
 * Large bodies of the group go to the body log, written and synced before the transaction that
 * points at them commits (sqlite-body-log.ts). Space comes from queue_log_head, read inside this
 * transaction: another process's writer cannot allocate the same bytes.
 */
function logBodies(group: readonly WriterRequest[]): (BodyLocation | undefined)[] {
  const bodies: Uint8Array[] = [];
  for (const { segment } of group) if (segment && isLogged(segment.events)) bodies.push(segment.events);
  if (bodies.length === 0) return [];
  const written = bodyLog.append(logHead.get() as { fileNo: number; endOffset: number }, bodies);
  setLogHead.run(written.head.fileNo, written.head.endOffset);
  let next = 0;
  return group.map(({ segment }) => (segment && isLogged(segment.events) ? written.locations[next++] : undefined));
}

function commitGroup(group: WriterRequest[]): WriterReply {
  const ids = group.map((r) => r.id);
  const started = performance.now();
  let appending = false;
  try {
    beginImmediate();
    try {
      if (trimPending) trimInTransaction();
      appending = group.some(({ segment }) => segment !== undefined && isLogged(segment.events));
      let seq = (nextSeq.get() as { next: number } | undefined)?.next ?? 1;
      const firstSeqs: number[] = [];
      const logged = logBodies(group);
      const accepted = new Map<string, { dataSetId: string; hour: number; n: number }>();
      group.forEach(({ segment: s }, i) => {
        if (!s) {
          firstSeqs.push(0);
          return;
        }
        const at = logged[i];
        if (at) insert.run(seq, s.count, s.receivedAt, s.dataSetId, s.keyId, s.requestId, s.policyVersion, s.mergeWindowMs, NO_BYTES, s.metas, at.fileNo, at.offset, at.length);
        else insert.run(seq, s.count, s.receivedAt, s.dataSetId, s.keyId, s.requestId, s.policyVersion, s.mergeWindowMs, s.events, s.metas, null, null, null);
        firstSeqs.push(seq);
        seq += s.count;
        const hour = s.receivedAt - (s.receivedAt % HOUR_MS);
        const key = `${s.dataSetId}\u0000${hour}`;
        const count = accepted.get(key);
        if (count) count.n += s.count;
        else accepted.set(key, { dataSetId: s.dataSetId, hour, n: s.count });
      });
      for (const { dataSetId, hour, n } of accepted.values()) addAccepted.run(dataSetId, hour, n);
      commit.run();
      return { ok: true, ids, firstSeqs, durationMs: performance.now() - started };
    } catch (error) {
      if (db.inTransaction) db.exec('ROLLBACK');
      throw error;
    }
  } catch (error) {
    // Some of the group's bodies may be in the log (all of them, or part of a write that failed):
    // no row points at them. Cut them off before anything is answered.
    if (appending) trimBodyLog();
    return { ok: false, ids, message: error instanceof Error ? error.message : String(error) };
  }
}

function closeWriter(): void {
  // Worker termination closes no file descriptors of the process: close the log's here.
  bodyLog.close();
  db.close();
  port.postMessage({ closed: true });
}

const eventsOf = (request: WriterRequest) => request.segment?.count ?? 0;

function commitAndReply(group: WriterRequest[]): void {
  const reply = commitGroup(group);
  // The bodies go back to the serving thread to die there (queue/DESIGN.md, Memory): this thread
  // allocates little, so its collector would free them only after 64 MB of dead external memory
  // had piled up, and glibc keeps the heap it grew for them.
  const spent: ArrayBuffer[] = [];
  for (const { segment } of group) if (segment && typeof segment.events !== 'string') spent.push(segment.events.buffer as ArrayBuffer);
  port.postMessage(reply, spent);
}

port.on('message', (first: WriterMessage) => {
  if (!Array.isArray(first)) {
    closeWriter();
    return;
  }
  // Requests received and not yet committed, oldest first. A group takes requests in order while
  // the next one still fits under MAX_EVENTS_PER_COMMIT (a lone request over it is committed
  // alone), exactly as the PostgreSQL queue groups: what does not fit waits for the next commit,
  // right after this one. A message is the serving thread's whole turn, so the cap must be checked
  // per request, not per message.
  const waiting: WriterRequest[] = [...(first as readonly WriterRequest[])];
  let next = 0;
  let closeAfter = false;
  while (next < waiting.length) {
    const group: WriterRequest[] = [];
    let events = 0;
    for (;;) {
      while (next < waiting.length && (group.length === 0 || events + eventsOf(waiting[next]!) <= MAX_EVENTS_PER_COMMIT)) {
        events += eventsOf(waiting[next]!);
        group.push(waiting[next++]!);
      }
      if (next < waiting.length || closeAfter) break; // full, or nothing more may join
      const message = receiveMessageOnPort(port)?.message as WriterMessage | undefined;
      if (message === undefined) break;
      if (!Array.isArray(message)) closeAfter = true; // the queue closes once everything before is answered
      else waiting.push(...(message as readonly WriterRequest[]));
    }
    commitAndReply(group);
  }
  if (closeAfter) closeWriter();
});

// A writer killed between its append and its COMMIT (this process's last run, or another
// process's) left bytes past the committed end: gone before this writer takes any request.
trimBodyLog();
port.postMessage({ ready: true });
