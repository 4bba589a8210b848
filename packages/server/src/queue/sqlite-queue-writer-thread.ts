/**
 * The queue's writer thread. better-sqlite3 is synchronous and a FULL-sync commit waits for the
 * disk, so commits run here, never on the thread that serves requests.
 *
 * Each message is one group: the segments of every request that arrived while the previous commit
 * was in progress. They are written in one IMMEDIATE transaction and one sync; the reply carries the
 * first sequence number of each segment. Sequence numbers are taken inside the transaction, from
 * the table itself, so several processes appending to one file (serve --workers N) never collide.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { openQueueDatabase } from './sqlite-queue-store.js';
import type { WriterReply, WriterRequest } from './sqlite-queue-writer-protocol.js';

const port = parentPort!;
const db = openQueueDatabase((workerData as { file: string }).file);
// Checkpoints run on their own thread (sqlite-queue-checkpointer-thread.ts), never inside a commit.
db.pragma('wal_autocheckpoint = 0');
const nextSeq = db.prepare(
  'SELECT first_seq + event_count AS next FROM queue_segments ORDER BY first_seq DESC LIMIT 1',
);
const insert = db.prepare(
  `INSERT INTO queue_segments (first_seq, event_count, received_at, data_set_id, key_id, request_id, policy_version, events, metas)
   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
);
const begin = db.prepare('BEGIN IMMEDIATE');
const commit = db.prepare('COMMIT');

port.on('message', (request: WriterRequest) => {
  const started = performance.now();
  let reply: WriterReply;
  try {
    begin.run();
    try {
      let seq = ((nextSeq.get() as { next: number } | undefined)?.next ?? 1);
      const firstSeqs: number[] = [];
      for (const s of request.segments) {
        insert.run(seq, s.count, s.receivedAt, s.dataSetId, s.keyId, s.requestId, s.policyVersion, s.events, s.metas);
        firstSeqs.push(seq);
        seq += s.count;
      }
      commit.run();
      reply = { id: request.id, ok: true, firstSeqs, durationMs: performance.now() - started };
    } catch (error) {
      if (db.inTransaction) db.exec('ROLLBACK');
      throw error;
    }
  } catch (error) {
    reply = { id: request.id, ok: false, message: error instanceof Error ? error.message : String(error) };
  }
  port.postMessage(reply);
});

port.postMessage({ ready: true });
