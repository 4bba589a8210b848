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
import type { Logger } from '../observability/logger.js';
import type { QueueRecord } from '../queue/event-queue.js';
import type { ViewStore } from '../merged-view/view-store.js';
import { applyRecords, type ApplyOptions, type BatchResult } from './view-applier.js';

/** The consumer's name in the offset table. */
export const VIEW_CONSUMER = 'merged-view';

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

export interface ConsumerOptions extends ApplyOptions {
  readonly batchSize?: number;
  readonly consumer?: string;
}

export const DEFAULT_BATCH_SIZE = 2000;

export class ViewConsumer {
  readonly #store: ViewStore;
  readonly #source: QueueSource;
  readonly #options: ConsumerOptions;
  readonly #name: string;

  constructor(store: ViewStore, source: QueueSource, options: ConsumerOptions) {
    this.#store = store;
    this.#source = source;
    this.#options = options;
    this.#name = options.consumer ?? VIEW_CONSUMER;
  }

  /** Applies one batch; returns what it did (records: 0 when caught up). */
  async step(): Promise<BatchResult & { nextSeq: number }> {
    const from = await this.#store.offset(this.#name);
    const limit = this.#options.batchSize ?? DEFAULT_BATCH_SIZE;
    let records: QueueRecord[];
    let nextSeq: number;
    if (this.#source.readBatch) ({ records, nextSeq } = await this.#source.readBatch(from, limit));
    else {
      records = await this.#source.read(from, limit);
      nextSeq = records.length > 0 ? records[records.length - 1]!.seq + 1 : from;
    }
    if (nextSeq === from) return { records: 0, created: 0, merged: 0, discarded: 0, nextSeq: from };
    return this.#store.transaction(async (tx) => {
      if ((await tx.offset(this.#name)) !== from) {
        // Another consumer applied these meanwhile; start over from the new offset.
        return { records: 0, created: 0, merged: 0, discarded: 0, nextSeq: from };
      }
      const result = records.length > 0 ? await applyRecords(tx, records, this.#options) : { records: 0, created: 0, merged: 0, discarded: 0 };
      await tx.setOffset(this.#name, nextSeq);
      return { ...result, nextSeq };
    });
  }

  /** Applies batches until the queue has nothing more. */
  async drain(): Promise<number> {
    let total = 0;
    let at = -1;
    for (;;) {
      const result = await this.step();
      if (result.records === 0 && result.nextSeq === at) return total;
      at = result.nextSeq;
      total += result.records;
    }
  }
}

export interface RunOptions {
  readonly logger: Logger;
  /** Idle poll interval. */
  readonly pollMs?: number;
  /** Resolves when the loop must stop (after the batch in progress). */
  readonly stopped: Promise<void>;
  /** Called every few seconds while running (heartbeat, policy refresh). */
  readonly onTick?: () => Promise<void> | void;
  readonly tickMs?: number;
}

/** Runs the consumer until `stopped` resolves. Logs counts only, never identifiers or contents. */
export async function runConsumerLoop(consumer: ViewConsumer, options: RunOptions): Promise<void> {
  const pollMs = options.pollMs ?? 100;
  const tickMs = options.tickMs ?? 2000;
  let stop = false;
  let wake: (() => void) | null = null;
  void options.stopped.then(() => {
    stop = true;
    wake?.();
  });
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        wake = null;
        resolve();
      }, ms);
      wake = () => {
        clearTimeout(timer);
        wake = null;
        resolve();
      };
    });

  let lastTick = 0;
  let lastReport = Date.now();
  let failures = 0;
  const totals = { records: 0, created: 0, merged: 0, discarded: 0 };
  while (!stop) {
    const now = Date.now();
    if (options.onTick && now - lastTick >= tickMs) {
      lastTick = now;
      try {
        await options.onTick();
      } catch (error) {
        options.logger.warn({ err: { message: (error as Error).message } }, 'consumer tick failed');
      }
    }
    let result: BatchResult & { nextSeq: number };
    try {
      result = await consumer.step();
      failures = 0;
    } catch (error) {
      failures++;
      const delay = Math.min(30_000, 250 * 2 ** Math.min(failures, 7));
      options.logger.error({ err: { message: (error as Error).message }, retry_in_ms: delay }, 'consumer batch failed; retrying');
      await sleep(delay);
      continue;
    }
    totals.records += result.records;
    totals.created += result.created;
    totals.merged += result.merged;
    totals.discarded += result.discarded;
    if (Date.now() - lastReport >= 10_000 && totals.records > 0) {
      options.logger.info({ ...totals, next_seq: result.nextSeq }, 'consumer progress');
      totals.records = totals.created = totals.merged = totals.discarded = 0;
      lastReport = Date.now();
    }
    if (result.records === 0) await sleep(pollMs);
    else await new Promise<void>((resolve) => setImmediate(resolve));
  }
}
