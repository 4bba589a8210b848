/**
 * The queue's writer thread. better-sqlite3 is synchronous and a FULL-sync commit waits for the
 * disk, so commits run here, never on the thread that serves requests.
 *
 * Group commit happens here: the serving thread posts every request the moment it is ready, and
 * each time this thread wakes it drains everything already waiting on its port (up to
 * MAX_EVENTS_PER_COMMIT events) into one IMMEDIATE transaction and one sync. While a commit syncs,
 * the next group queues up. A commit therefore never waits for the serving thread to notice the
 * previous reply: at load the writer runs commit after commit, and at low load a lone request is
 * committed at once.
 *
 * Sequence numbers are taken inside the transaction, from the table itself, so several processes
 * appending to one file (serve --workers N) never collide.
 */
import { parentPort, receiveMessageOnPort, workerData } from 'node:worker_threads';
import { openQueueDatabase } from './sqlite-queue-store.js';
import type { WriterReply, WriterRequest } from './sqlite-queue-writer-protocol.js';

/** Upper bound of events per commit, so one group never holds an unbounded transaction. */
const MAX_EVENTS_PER_COMMIT = 20_000;

const port = parentPort!;
const db = openQueueDatabase((workerData as { file: string }).file);
// Checkpoints run on their own thread (sqlite-queue-checkpointer-thread.ts), never inside a commit.
db.pragma('wal_autocheckpoint = 0');
const nextSeq = db.prepare('SELECT first_seq + event_count AS next FROM queue_segments ORDER BY first_seq DESC LIMIT 1');
const insert = db.prepare(
  `INSERT INTO queue_segments (first_seq, event_count, received_at, data_set_id, key_id, request_id, policy_version, events, metas)
   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
);
const begin = db.prepare('BEGIN IMMEDIATE');
const commit = db.prepare('COMMIT');

function commitGroup(group: WriterRequest[]): WriterReply {
  const ids = group.map((r) => r.id);
  const started = performance.now();
  try {
    begin.run();
    try {
      let seq = (nextSeq.get() as { next: number } | undefined)?.next ?? 1;
      const firstSeqs: number[] = [];
      for (const { segment: s } of group) {
        if (!s) {
          firstSeqs.push(0);
          continue;
        }
        insert.run(seq, s.count, s.receivedAt, s.dataSetId, s.keyId, s.requestId, s.policyVersion, s.events, s.metas);
        firstSeqs.push(seq);
        seq += s.count;
      }
      commit.run();
      return { ok: true, ids, firstSeqs, durationMs: performance.now() - started };
    } catch (error) {
      if (db.inTransaction) db.exec('ROLLBACK');
      throw error;
    }
  } catch (error) {
    return { ok: false, ids, message: error instanceof Error ? error.message : String(error) };
  }
}

port.on('message', (first: WriterRequest) => {
  const group = [first];
  let events = first.segment?.count ?? 0;
  while (events < MAX_EVENTS_PER_COMMIT) {
    const next = receiveMessageOnPort(port);
    if (next === undefined) break;
    const request = next.message as WriterRequest;
    group.push(request);
    events += request.segment?.count ?? 0;
  }
  port.postMessage(commitGroup(group));
});

port.postMessage({ ready: true });
