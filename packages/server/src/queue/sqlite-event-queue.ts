/**
 * Embedded durable queue: SQLite in WAL mode with synchronous=FULL, written by one worker thread.
 *
 * Group commit: at most one commit is in flight. Appends that arrive meanwhile wait in `#pending`
 * and all go into the next commit together, so N concurrent requests cost one sync, not N. At low
 * load an append is sent at once and pays exactly one sync of latency.
 *
 * Invariants:
 * - An append's promise resolves only from the writer's reply to the commit that holds it.
 * - A failed commit rejects every append in it (the request answers 500; nothing is acknowledged),
 *   marks the queue unwritable, and the next append simply tries again: recovery needs no restart.
 *   While unwritable and idle, an empty transaction probes the store every PROBE_INTERVAL_MS, so
 *   readiness turns true again when the fault clears even if no request arrives here.
 * - If the writer thread dies, everything in flight is rejected and a new thread is started.
 */
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
import type { SegmentInput, WriterReply, WriterRequest } from './sqlite-queue-writer-protocol.js';

interface PendingAppend {
  readonly segment: SegmentInput;
  readonly resolve: (receipt: AppendReceipt) => void;
  readonly reject: (error: Error) => void;
}

/** Upper bound of events per commit, so one group never holds an unbounded transaction. */
const MAX_EVENTS_PER_COMMIT = 20_000;
const PROBE_INTERVAL_MS = 500;
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
  #pending: PendingAppend[] = [];
  #inFlight: { id: number; group: PendingAppend[] } | null = null;
  #nextId = 1;
  #health: QueueHealth = { writable: true, lastError: null };
  #closed = false;
  #drained: (() => void) | null = null;
  #probeTimer: NodeJS.Timeout | null = null;
  readonly #checkpointer: Worker;

  constructor(file: string, observer?: QueueCommitObserver) {
    this.#file = file;
    this.#observer = observer;
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
      workerData: { file: this.#file },
    });
    worker.on('message', (message: WriterReply | { ready: true }) => {
      if ('ready' in message) return;
      this.#onReply(message);
    });
    worker.on('error', (error) => this.#onWorkerDeath(error));
    worker.on('exit', (code) => {
      if (!this.#closed) this.#onWorkerDeath(new Error(`queue writer thread exited with code ${code}`));
    });
    return worker;
  }

  #setHealth(health: QueueHealth): void {
    const changed = health.writable !== this.#health.writable;
    this.#health = health;
    if (!changed) return;
    this.#observer?.onHealth(health);
    if (!health.writable && !this.#probeTimer) {
      this.#probeTimer = setInterval(() => {
        // Only when idle: a real append is as good a probe, and nothing may overtake a pending one.
        if (this.#inFlight || this.#pending.length > 0 || this.#closed) return;
        if (!hasRoomForARequest(this.#file)) return;
        this.#send([]);
      }, PROBE_INTERVAL_MS);
      this.#probeTimer.unref();
    } else if (health.writable && this.#probeTimer) {
      clearInterval(this.#probeTimer);
      this.#probeTimer = null;
    }
  }

  #onWorkerDeath(error: Error): void {
    if (this.#closed) return;
    this.#setHealth({ writable: false, lastError: error.message });
    const inFlight = this.#inFlight;
    this.#inFlight = null;
    if (inFlight) this.#fail(inFlight.group, error);
    this.#worker.removeAllListeners();
    void this.#worker.terminate();
    this.#worker = this.#startWorker();
    this.#flush();
  }

  #fail(group: PendingAppend[], cause: Error): void {
    if (group.length === 0) return;
    this.#observer?.onFailure({ requests: group.length, events: group.reduce((n, p) => n + p.segment.count, 0) });
    const error = new QueueUnavailableError(`queue commit failed: ${cause.message}`, { cause });
    for (const pending of group) pending.reject(error);
  }

  #onReply(reply: WriterReply): void {
    const inFlight = this.#inFlight;
    if (!inFlight || inFlight.id !== reply.id) return;
    this.#inFlight = null;
    if (reply.ok) {
      this.#setHealth({ writable: true, lastError: null });
      let events = 0;
      inFlight.group.forEach((pending, i) => {
        events += pending.segment.count;
        pending.resolve({ firstSeq: reply.firstSeqs[i]!, count: pending.segment.count });
      });
      if (inFlight.group.length > 0) {
        this.#observer?.onCommit({ requests: inFlight.group.length, events, durationMs: reply.durationMs });
      }
    } else {
      this.#setHealth({ writable: false, lastError: reply.message });
      this.#fail(inFlight.group, new Error(reply.message));
    }
    this.#flush();
  }

  #flush(): void {
    if (this.#inFlight || this.#pending.length === 0) {
      if (!this.#inFlight && this.#pending.length === 0) this.#drained?.();
      return;
    }
    let events = 0;
    let take = 0;
    while (take < this.#pending.length && (take === 0 || events + this.#pending[take]!.segment.count <= MAX_EVENTS_PER_COMMIT)) {
      events += this.#pending[take]!.segment.count;
      take++;
    }
    this.#send(this.#pending.splice(0, take));
  }

  #send(group: PendingAppend[]): void {
    const request: WriterRequest = { id: this.#nextId++, segments: group.map((p) => p.segment) };
    this.#inFlight = { id: request.id, group };
    const transfer: ArrayBuffer[] = [];
    for (const { segment } of group) {
      if (typeof segment.events !== 'string') transfer.push(segment.events.buffer as ArrayBuffer);
    }
    this.#worker.postMessage(request, transfer);
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
      events: batch.rawBody ? ownedBytes(batch.rawBody) : JSON.stringify(batch.events),
      metas: hasMeta ? JSON.stringify(batch.metas.map((meta) => meta ?? null)) : null,
    };
    return new Promise<AppendReceipt>((resolve, reject) => {
      this.#pending.push({ segment, resolve, reject });
      this.#flush();
    });
  }

  async read(options: ReadOptions): Promise<QueueRecord[]> {
    const db = openQueueDatabase(this.#file, { readonly: true });
    try {
      return readRecords(db, options);
    } finally {
      db.close();
    }
  }

  health(): QueueHealth {
    return this.#health;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    if (this.#inFlight || this.#pending.length > 0) {
      await new Promise<void>((resolve) => (this.#drained = resolve));
    }
    this.#closed = true;
    if (this.#probeTimer) clearInterval(this.#probeTimer);
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
