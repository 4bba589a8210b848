/**
 * Embedded durable queue: SQLite in WAL mode with synchronous=FULL, written by one worker thread.
 *
 * Group commit: appends are posted to the writer thread at the end of the event-loop turn that
 * made them (one message per turn); the writer drains whatever is waiting each time it wakes and
 * commits it in one transaction and one sync. N concurrent requests cost one sync, not N, and no
 * commit waits for this thread to handle the previous reply.
 *
 * Invariants:
 * - An append's promise resolves only from the writer's reply to the commit that holds it.
 * - A failed commit rejects every append in it (the request answers 500; nothing is acknowledged),
 *   marks the queue unwritable, and the next append simply tries again: recovery needs no restart.
 *   While unwritable and idle, an empty transaction probes the store every PROBE_INTERVAL_MS, so
 *   readiness turns true again when the fault clears even if no request arrives here.
 * - If the writer thread dies, every append not yet answered is rejected and a new thread is started.
 */
import { QueueHealthState } from './queue-health.js';
import { statfsSync } from 'node:fs';
import { dirname } from 'node:path';
import { Worker } from 'node:worker_threads';
import { QueueUnavailableError } from '../errors.js';
import type {
  AppendReceipt,
  EventQueue,
  QueueAppend,
  QueueCommitObserver,
  QueueHealth,
  QueueRecord,
  ReadOptions,
} from './event-queue.js';
import { openQueueDatabase, readRecords } from './sqlite-queue-store.js';
import type { SegmentInput, WriterMessage, WriterReply, WriterRequest } from './sqlite-queue-writer-protocol.js';

interface PendingAppend {
  readonly count: number;
  readonly resolve: (receipt: AppendReceipt) => void;
  readonly reject: (error: Error) => void;
}

/**
 * Free space the probe requires before it may declare the queue writable again: one request of
 * the maximum size (1 MiB) as WAL frames, with room to spare. An empty transaction proves that the
 * lock can be taken, not that a commit can grow the WAL: without this, readiness would flap back
 * to true every 500 ms on a full disk while every real commit fails.
 */
const PROBE_MIN_FREE_BYTES = 4 * 1024 * 1024;

function hasRoomForARequest(file: string): boolean {
  try {
    const fs = statfsSync(dirname(file));
    return fs.bavail * fs.bsize >= PROBE_MIN_FREE_BYTES;
  } catch {
    return true; // no statfs here: let the transaction decide
  }
}

/**
 * Bytes that can be transferred to the writer thread: the view must cover its whole ArrayBuffer
 * (a slice of a pooled or larger buffer is copied once into its own).
 */
function ownedBytes(bytes: Uint8Array): Uint8Array {
  if (bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength && bytes.byteLength >= 4096) return bytes;
  const copy = new Uint8Array(bytes.byteLength);
  copy.set(bytes);
  return copy;
}

export class SqliteEventQueue implements EventQueue {
  readonly #file: string;
  readonly #observer: QueueCommitObserver | undefined;
  #worker: Worker;
  /** Appends posted to the writer and not yet answered, by request id. Probes are not in here. */
  readonly #pending = new Map<number, PendingAppend>();
  #nextId = 1;
  readonly #health: QueueHealthState;
  #closed = false;
  #drained: (() => void) | null = null;
  #probing = false;
  #onWriterClosed: (() => void) | null = null;
  #outbox: WriterRequest[] = [];
  #outboxTransfer: ArrayBuffer[] = [];
  #flushScheduled = false;
  readonly #checkpointer: Worker;

  readonly #bodyLogFileBytes: number | undefined;

  /** `bodyLogFileBytes`: size at which the body log starts a new file (tests set it small). */
  constructor(file: string, observer?: QueueCommitObserver, options: { bodyLogFileBytes?: number } = {}) {
    this.#file = file;
    this.#observer = observer;
    this.#health = new QueueHealthState(observer, () => this.#probe());
    this.#bodyLogFileBytes = options.bodyLogFileBytes;
    // Create the file and schema here so that readers and a failing writer start from a known state.
    openQueueDatabase(file).close();
    this.#worker = this.#startWorker();
    this.#checkpointer = new Worker(new URL('./sqlite-queue-checkpointer-thread.js', import.meta.url), {
      workerData: { file, intervalMs: 200 },
    });
    // A failed checkpointer costs disk space (the WAL grows), never durability; the writer goes on.
    this.#checkpointer.on('error', () => {});
    this.#checkpointer.unref();
  }

  #startWorker(): Worker {
    const worker = new Worker(new URL('./sqlite-queue-writer-thread.js', import.meta.url), {
      workerData: { file: this.#file, bodyLogFileBytes: this.#bodyLogFileBytes },
    });
    worker.on('message', (message: WriterReply | { ready: true } | { closed: true }) => {
      if ('closed' in message) this.#onWriterClosed?.();
      else if (!('ready' in message)) this.#onReply(message);
    });
    worker.on('error', (error) => {
      if (this.#closed) this.#onWriterClosed?.();
      else this.#onWorkerDeath(error);
    });
    worker.on('exit', (code) => {
      if (this.#closed) this.#onWriterClosed?.();
      else this.#onWorkerDeath(new Error(`queue writer thread exited with code ${code}`));
    });
    return worker;
  }

  /** The probe while not writable: an empty commit, only when idle (a real append is as good a probe). */
  #probe(): void {
    if (this.#pending.size > 0 || this.#probing || this.#closed) return;
    if (!hasRoomForARequest(this.#file)) return;
    this.#probing = true;
    this.#worker.postMessage([{ id: this.#nextId++ }] satisfies WriterMessage);
  }

  #onWorkerDeath(error: Error): void {
    if (this.#closed) return;
    this.#health.set({ writable: false, lastError: error.message });
    this.#probing = false;
    this.#fail([...this.#pending.keys()], error);
    // Not yet posted, and already answered 500 above: not for the new thread.
    this.#outbox = [];
    this.#outboxTransfer = [];
    this.#worker.removeAllListeners();
    void this.#worker.terminate();
    this.#worker = this.#startWorker();
  }

  #take(ids: readonly number[]): PendingAppend[] {
    const group: PendingAppend[] = [];
    for (const id of ids) {
      const pending = this.#pending.get(id);
      if (pending) {
        this.#pending.delete(id);
        group.push(pending);
      } else {
        this.#probing = false;
      }
    }
    return group;
  }

  #fail(ids: readonly number[], cause: Error): void {
    const group = this.#take(ids);
    if (group.length > 0) {
      this.#observer?.onFailure({ requests: group.length, events: group.reduce((n, p) => n + p.count, 0) });
      const error = new QueueUnavailableError(`queue commit failed: ${cause.message}`, { cause });
      for (const pending of group) pending.reject(error);
    }
    this.#checkDrained();
  }

  #onReply(reply: WriterReply): void {
    if (!reply.ok) {
      this.#health.set({ writable: false, lastError: reply.message });
      this.#fail(reply.ids, new Error(reply.message));
      return;
    }
    this.#health.set({ writable: true, lastError: null });
    let requests = 0;
    let events = 0;
    reply.ids.forEach((id, i) => {
      const pending = this.#pending.get(id);
      if (!pending) {
        this.#probing = false;
        return;
      }
      this.#pending.delete(id);
      requests++;
      events += pending.count;
      pending.resolve({ firstSeq: reply.firstSeqs[i]!, count: pending.count });
    });
    if (requests > 0) this.#observer?.onCommit({ requests, events, durationMs: reply.durationMs });
    this.#checkDrained();
  }

  #checkDrained(): void {
    if (this.#pending.size === 0) this.#drained?.();
  }

  append(batch: QueueAppend): Promise<AppendReceipt> {
    if (this.#closed) return Promise.reject(new QueueUnavailableError('queue is closed'));
    const hasMeta = batch.metas.some((meta) => meta !== undefined);
    const segment: SegmentInput = {
      count: batch.events.length,
      receivedAt: batch.receivedAt,
      dataSetId: batch.dataSetId,
      keyId: batch.keyId,
      requestId: batch.requestId,
      policyVersion: batch.policyVersion,
      mergeWindowMs: batch.mergeWindowMs,
      events: batch.rawBody ? ownedBytes(batch.rawBody) : JSON.stringify(batch.events),
      metas: hasMeta ? JSON.stringify(batch.metas.map((meta) => meta ?? null)) : null,
    };
    const id = this.#nextId++;
    return new Promise<AppendReceipt>((resolve, reject) => {
      this.#pending.set(id, { count: segment.count, resolve, reject });
      this.#outbox.push({ id, segment });
      if (typeof segment.events !== 'string') this.#outboxTransfer.push(segment.events.buffer as ArrayBuffer);
      if (!this.#flushScheduled) {
        this.#flushScheduled = true;
        setImmediate(this.#flushOutbox);
      }
    });
  }

  /**
   * Posts every append of this event-loop turn in one message: at thousands of requests per second
   * one postMessage per request showed as ~5% of the serving thread's profile samples, and woke
   * the writer thread once per request (~25% of a core; ~10% now). setImmediate runs right after the
   * I/O callbacks of the turn, so a lone request waits for nothing.
   */
  readonly #flushOutbox = (): void => {
    this.#flushScheduled = false;
    if (this.#outbox.length === 0) return;
    const requests = this.#outbox;
    const transfer = this.#outboxTransfer;
    this.#outbox = [];
    this.#outboxTransfer = [];
    this.#worker.postMessage(requests satisfies WriterMessage, transfer);
  };

  async read(options: ReadOptions): Promise<QueueRecord[]> {
    const db = openQueueDatabase(this.#file, { readonly: true });
    try {
      return readRecords(db, options);
    } finally {
      db.close();
    }
  }

  health(): QueueHealth {
    return this.#health.current;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    if (this.#pending.size > 0) await new Promise<void>((resolve) => (this.#drained = resolve));
    this.#closed = true;
    this.#health.stop();
    // Let the writer close its files (the body log's descriptors outlive a terminated thread).
    // Not removeAllListeners() first: that also drops the Worker's own listeners that keep its
    // port referenced, and the answer would never arrive.
    await new Promise<void>((resolve) => {
      this.#onWriterClosed = resolve;
      this.#worker.postMessage({ close: true } satisfies WriterMessage);
    });
    this.#worker.removeAllListeners();
    await this.#worker.terminate();
    await new Promise<void>((resolve) => {
      const done = () => resolve();
      this.#checkpointer.once('message', done);
      this.#checkpointer.once('exit', done);
      this.#checkpointer.postMessage({ type: 'close' });
    });
    await this.#checkpointer.terminate();
  }
}
