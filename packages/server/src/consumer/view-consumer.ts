/**
 * The consumer of the queue that maintains the merged view: reads from its durably stored offset,
 * applies a batch and advances the offset in one view transaction.
 *
 * Delivery is at-least-once (a batch interrupted before its commit is read again), and exactly-once
 * in effect: the offset moves only with the batch's effects, so a record is either fully applied
 * and behind the offset, or not applied at all and ahead of it. A consumer killed at any point and
 * restarted ends in exactly the state of an uninterrupted run.
 *
 * Two consumers on one view would not double-apply either: each batch re-reads the offset inside
 * its write transaction and gives up if another consumer moved it meanwhile.
 */
import type { QueueRecord } from '../queue/event-queue.js';
import type { ViewStore, ViewTransaction } from '../merged-view/view-store.js';
import { VIEW_CONSUMER } from '../model/consumer-offsets.js';
import { applyRecords, type ApplyOptions, type BatchResult } from './view-applier.js';

/** Records read for a batch, and where the next read starts (past skipped records of other partitions). */
export interface QueueBatch {
  readonly records: QueueRecord[];
  readonly nextSeq: number;
}

/** Where the consumer reads records; the embedded one is `sqlite-queue-source.ts`. */
export interface QueueSource {
  /** Records from `fromSeq` on, in sequence order (empty when there are none yet). */
  read(fromSeq: number, limit: number): Promise<QueueRecord[]>;
  /** Like read, and says how far it scanned (a partition's source skips other partitions' records). */
  readBatch?(fromSeq: number, limit: number): Promise<QueueBatch>;
  close(): Promise<void>;
}

/** What applies a batch inside the view transaction: view-applier.ts, or a part of the sharded layout. */
export type BatchApplier = (tx: ViewTransaction, records: readonly QueueRecord[], options: ApplyOptions) => Promise<BatchResult>;

export interface ConsumerOptions extends ApplyOptions {
  readonly batchSize?: number;
  readonly consumer?: string;
  /** Default: applyRecords (view-applier.ts); the sharded layout's parts: record-shard-applier.ts, identity-stage-applier.ts. */
  readonly applier?: BatchApplier;
}

export const DEFAULT_BATCH_SIZE = 2000;

/** What one step did; `moved`: the offset moved (or another consumer moved it): step again at once. */
export interface StepResult extends BatchResult {
  readonly nextSeq: number;
  readonly moved: boolean;
  /** Stopped at a fence (merged-view/view-fence.ts): there may be records to apply once it is released. */
  readonly held?: boolean;
}

export class ViewConsumer {
  readonly #store: ViewStore;
  readonly #source: QueueSource;
  readonly #options: ConsumerOptions;
  readonly #name: string;
  /** The last step stopped at a fence: look at the fence before reading the queue again. */
  #held = false;

  constructor(store: ViewStore, source: QueueSource, options: ConsumerOptions) {
    this.#store = store;
    this.#source = source;
    this.#options = options;
    this.#name = options.consumer ?? VIEW_CONSUMER;
  }

  /** Applies one batch; returns what it did (moved: false when caught up). */
  async step(): Promise<StepResult> {
    const from = await this.#store.offset(this.#name);
    const nothing = { records: 0, created: 0, merged: 0, discarded: 0, nextSeq: from, moved: false };
    const held = { ...nothing, held: true };
    // Held at a fence (merged-view/view-fence.ts): nothing to read until it is released. Looked at
    // only while the last step was held: the look under the write lock below is the one that
    // decides, so a lane that was not held saves a read per batch (a round trip on PostgreSQL) and
    // reads the queue once in vain when a fence comes.
    if (this.#held) {
      const fenceBefore = (await this.#store.fence?.()) ?? null;
      if (fenceBefore !== null && from > fenceBefore) return held;
    }
    const limit = this.#options.batchSize ?? DEFAULT_BATCH_SIZE;
    let records: QueueRecord[];
    let nextSeq: number;
    if (this.#source.readBatch) ({ records, nextSeq } = await this.#source.readBatch(from, limit));
    else {
      records = await this.#source.read(from, limit);
      nextSeq = records.length > 0 ? records[records.length - 1]!.seq + 1 : from;
    }
    if (nextSeq === from) return nothing;
    const result = await this.#store.transaction(async (tx): Promise<StepResult> => {
      if ((await tx.offset(this.#name)) !== from) {
        // Another consumer applied these meanwhile; start over from the new offset.
        return { records: 0, created: 0, merged: 0, discarded: 0, nextSeq: from, moved: true };
      }
      // The fence again, under the write lock: one set after the read above still stops this batch
      // at it, so no batch ever commits past a fence (the records past it are read again later).
      const fence = (await tx.fence?.()) ?? null;
      if (fence !== null) {
        if (from > fence) return held;
        if (nextSeq > fence + 1) {
          let keep = records.length;
          while (keep > 0 && records[keep - 1]!.seq > fence) keep--;
          records = records.slice(0, keep);
          nextSeq = fence + 1;
        }
      }
      // The suppression list as it is now, read under the write lock (SQLite: BEGIN IMMEDIATE;
      // PostgreSQL: the lane's offset row locked). `identities forget --suppress` stores the
      // suppression before its view deletions, which take the same lock (lifecycle-runner.ts,
      // postgres-view-eraser.ts): a deletion that ran before this batch took the lock had its
      // suppression stored first, so the batch applies under it; one that runs after deletes what the
      // batch applied. So nothing of the person comes back, however long the batch waited between
      // reading the queue and taking the lock (a consumer at nice 10 on a saturated machine), with no
      // clock in the argument.
      if (records.length > 0) await this.#options.suppressions?.refresh();
      const result = records.length > 0 ? await (this.#options.applier ?? applyRecords)(tx, records, this.#options) : { records: 0, created: 0, merged: 0, discarded: 0 };
      await tx.setOffset(this.#name, nextSeq);
      return { ...result, nextSeq, moved: true };
    });
    this.#held = result.held === true;
    return result;
  }

  /** Applies batches until the queue has nothing more. */
  async drain(): Promise<number> {
    let total = 0;
    let at = -1;
    for (;;) {
      const result = await this.step();
      if (!result.moved || (result.records === 0 && result.nextSeq === at)) return total;
      at = result.nextSeq;
      total += result.records;
    }
  }
}
