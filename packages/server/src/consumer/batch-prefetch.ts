/**
 * Prefetching a batch's reads: while a partition applies batch N, another thread reads the queue
 * records of batch N+1, decodes them and makes N+1's bulk reads of the view (stored records,
 * identifier links, identity nodes) on a read connection of its own, in one snapshot. N+1 then
 * takes those answers instead of walking the view's B-trees itself (lookup-overlay.ts says when
 * they are exact, and view-consumer.ts checks it). This puts the reads, the biggest share of a
 * batch after its writes (bench/README.md), and the queue decode on a second core: one data set,
 * which one partition applies, is no longer bound to one thread's CPU.
 *
 * A prefetch is only ever an optimisation: one that is late, failed, stale or for another batch
 * is not used, and the batch reads from its transaction as before. So a thread that dies, or a
 * prefetch that reads the queue differently, can slow the consumer down but never change the view.
 *
 * - PrefetchLoader: the work (queue read, decode, snapshot reads), in whatever thread runs it;
 * - LocalPrefetcher: the loader in the caller's thread (tests: it reads between the caller's
 *   batches, the stalest snapshot the overlay admits);
 * - ThreadPrefetcher: the loader in a worker thread (prefetch-thread.ts), as the consumer runs it.
 */
import { Worker } from 'node:worker_threads';
import type { SqliteViewStore } from '../merged-view/sqlite-view-store.js';
import { pairKey, type IdentityNode, type MergedRecord, type RecordRef, type ViewTransaction } from '../merged-view/view-store.js';
import { loadBatch, type ViewLookups } from './batch-loading.js';
import type { PrefetchedLookups } from './lookup-overlay.js';
import type { QueueSource } from './view-consumer.js';

export interface BatchPrefetcher {
  /** Starts the reads of the batch from `fromSeq` (the next one) against the view as it is now. */
  request(fromSeq: number, limit: number): void;
  /** The reads requested for `fromSeq`, or null (none requested, or it failed). */
  take(fromSeq: number): Promise<PrefetchedLookups | null>;
  close(): Promise<void>;
}

/** The reads of a transaction, and every key they asked for with what was found (null: nothing). */
class RecordingLookups implements ViewLookups {
  readonly records = new Map<string, MergedRecord | null>();
  readonly links = new Map<string, string | null>();
  readonly nodes = new Map<string, IdentityNode | null>();
  constructor(private readonly tx: ViewTransaction) {}

  async loadRecords(refs: readonly RecordRef[]): Promise<Map<string, MergedRecord>> {
    const found = await this.tx.loadRecords(refs);
    for (const r of refs) {
      const pk = pairKey(r.dataSetId, r.recordKey);
      this.records.set(pk, found.get(pk) ?? null);
    }
    return found;
  }
  async loadIdentifierLinks(pairs: readonly { dataSetId: string; identifier: string }[]): Promise<Map<string, string>> {
    const found = await this.tx.loadIdentifierLinks(pairs);
    for (const p of pairs) {
      const pk = pairKey(p.dataSetId, p.identifier);
      this.links.set(pk, found.get(pk) ?? null);
    }
    return found;
  }
  async loadIdentities(pairs: readonly { dataSetId: string; identityKey: string }[]): Promise<Map<string, IdentityNode>> {
    const found = await this.tx.loadIdentities(pairs);
    for (const p of pairs) {
      const pk = pairKey(p.dataSetId, p.identityKey);
      this.nodes.set(pk, found.get(pk) ?? null);
    }
    return found;
  }
}

export class PrefetchLoader {
  readonly #source: QueueSource;
  readonly #store: SqliteViewStore;
  readonly #consumer: string;

  /** `store`: a connection of this loader's own to the partition's view file. */
  constructor(source: QueueSource, store: SqliteViewStore, consumer: string) {
    this.#source = source;
    this.#store = store;
    this.#consumer = consumer;
  }

  async load(fromSeq: number, limit: number): Promise<PrefetchedLookups> {
    const records = this.#source.readBatch ? (await this.#source.readBatch(fromSeq, limit)).records : await this.#source.read(fromSeq, limit);
    return this.#store.readSnapshot(async (tx) => {
      // First read of the transaction: the snapshot starts here, and says which batches it holds.
      const offsetSeen = await tx.offset(this.#consumer);
      const recording = new RecordingLookups(tx);
      await loadBatch(recording, records);
      return {
        from: fromSeq,
        offsetSeen,
        records: recording.records,
        links: recording.links,
        nodes: recording.nodes,
      };
    });
  }

  async close(): Promise<void> {
    await this.#source.close();
    await this.#store.close();
  }
}

/** The loader in the caller's thread: the reads happen at request time, between the caller's batches. */
export class LocalPrefetcher implements BatchPrefetcher {
  readonly #loader: PrefetchLoader;
  #pending: { from: number; lookups: Promise<PrefetchedLookups | null> } | null = null;
  constructor(loader: PrefetchLoader) {
    this.#loader = loader;
  }
  request(fromSeq: number, limit: number): void {
    this.#pending = { from: fromSeq, lookups: this.#loader.load(fromSeq, limit).catch(() => null) };
  }
  async take(fromSeq: number): Promise<PrefetchedLookups | null> {
    const pending = this.#pending;
    this.#pending = null;
    return pending && pending.from === fromSeq ? pending.lookups : null;
  }
  async close(): Promise<void> {
    await this.#pending?.lookups;
    await this.#loader.close();
  }
}

export interface PrefetchThreadData {
  readonly queueFile: string;
  readonly viewFile: string;
  /** The partition's data sets: partitionOf(dataSetId, partitions) === partition. */
  readonly partition: number;
  readonly partitions: number;
  readonly consumer: string;
}

export type PrefetchThreadMessage = { readonly type: 'load'; readonly id: number; readonly from: number; readonly limit: number } | { readonly type: 'close' };
export type PrefetchThreadReply = { readonly id: number; readonly lookups?: PrefetchedLookups; readonly error?: string };

/** Young generation of the prefetch thread: it holds one batch's records and reads at a time. */
export const PREFETCH_THREAD_YOUNG_GENERATION_MB = 16;

/** The loader in a worker thread of its own (prefetch-thread.ts). */
export class ThreadPrefetcher implements BatchPrefetcher {
  readonly #data: PrefetchThreadData;
  #worker: Worker | null = null;
  #nextId = 1;
  /** The latest request, until taken. */
  #pending: { from: number; lookups: Promise<PrefetchedLookups | null> } | null = null;
  /** Requests not answered yet (at most one in practice). */
  readonly #inFlight = new Map<number, (l: PrefetchedLookups | null) => void>();

  constructor(data: PrefetchThreadData) {
    this.#data = data;
  }

  #thread(): Worker {
    if (this.#worker) return this.#worker;
    const worker = new Worker(new URL('./prefetch-thread.js', import.meta.url), {
      workerData: this.#data,
      resourceLimits: { maxYoungGenerationSizeMb: PREFETCH_THREAD_YOUNG_GENERATION_MB },
    });
    worker.on('message', (reply: PrefetchThreadReply) => {
      this.#inFlight.get(reply.id)?.(reply.lookups ?? null);
      this.#inFlight.delete(reply.id);
    });
    const fail = () => {
      if (this.#worker === worker) this.#worker = null;
      for (const resolve of this.#inFlight.values()) resolve(null);
      this.#inFlight.clear();
    };
    worker.on('error', fail);
    worker.on('exit', fail);
    this.#worker = worker;
    return worker;
  }

  request(fromSeq: number, limit: number): void {
    const id = this.#nextId++;
    const lookups = new Promise<PrefetchedLookups | null>((resolve) => this.#inFlight.set(id, resolve));
    this.#pending = { from: fromSeq, lookups };
    this.#thread().postMessage({ type: 'load', id, from: fromSeq, limit } satisfies PrefetchThreadMessage);
  }

  async take(fromSeq: number): Promise<PrefetchedLookups | null> {
    const pending = this.#pending;
    this.#pending = null;
    return pending && pending.from === fromSeq ? pending.lookups : null;
  }

  async close(): Promise<void> {
    for (const resolve of this.#inFlight.values()) resolve(null);
    this.#inFlight.clear();
    this.#pending = null;
    const worker = this.#worker;
    if (!worker) return;
    this.#worker = null;
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    worker.postMessage({ type: 'close' } satisfies PrefetchThreadMessage);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([exited, new Promise((resolve) => (timer = setTimeout(resolve, 5000)))]);
    clearTimeout(timer);
    await worker.terminate();
  }
}
