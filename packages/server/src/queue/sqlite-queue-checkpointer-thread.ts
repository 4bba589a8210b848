/**
 * WAL checkpoints for the queue, off the commit path.
 *
 * With SQLite's automatic checkpoint, the commit that crosses the WAL threshold also copies the
 * WAL into the database file and syncs it: that one request (and every request grouped with it)
 * waits tens to hundreds of milliseconds. The writer therefore runs with wal_autocheckpoint=0, and
 * this thread checkpoints PASSIVE-ly on its own connection: it never blocks the writer, and the
 * WAL is recycled once a checkpoint has caught up. On close it truncates the WAL.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { openQueueDatabase } from './sqlite-queue-store.js';

const port = parentPort!;
const { file, intervalMs } = workerData as { file: string; intervalMs: number };
const db = openQueueDatabase(file);

const timer = setInterval(() => {
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
  } catch {
    // Busy or a transient I/O error: the next round tries again; the writer is unaffected.
  }
}, intervalMs);

port.on('message', (message: { type: 'close' }) => {
  if (message.type !== 'close') return;
  clearInterval(timer);
  try {
    db.pragma('wal_checkpoint(TRUNCATE)');
  } catch {
    // Another process still writes to the file: its checkpointer will do it.
  }
  db.close();
  port.postMessage({ type: 'closed' });
});
