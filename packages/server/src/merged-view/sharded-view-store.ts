/**
 * The read side of a sharded view (consumer/identity-stage-applier.ts): P record shards (merged
 * records and counters, by record key) and P identity parts (identities and each record's
 * identity key, by data set). A record is read from its shard and its identity key from its data
 * set's identity part, resolved there; counters are summed over the shards; an export merges the
 * shards' records in order of first arrival (first_seq: a shard writes its new records in that
 * order; merged stream by stream, a page per shard in memory). The consumer offset the CLI and the lag see is the lowest of all parts'; heartbeats live
 * in identity part 0.
 *
 * Hazard: the parts are read one after another, not in one snapshot, and each may be at another
 * queue position while the consumer runs: a record just merged may show its identity as it was
 * before (or none yet), and counters may sum shards at different positions. Once every part has
 * applied the queue the reads are exact (as a data-set partitioned view's are across data sets).
 */
import type { CounterRow } from '../model/hourly-counters.js';
import { partitionAmong } from '../model/data-set-partition.js';
import { recordShardOf } from './record-shard.js';
import type { ConsumerHeartbeat, IdentityView, MergedRecord, ViewStore, ViewTransaction } from './view-store.js';

/** An identity part: a view store that also answers a record's identity key. */
export interface IdentityPartStore extends ViewStore {
  recordIdentity(dataSetId: string, recordKey: string): Promise<string | null>;
}

export class ShardedViewStore implements ViewStore {
  readonly #shards: readonly ViewStore[];
  readonly #identities: readonly IdentityPartStore[];

  constructor(shards: readonly ViewStore[], identities: readonly IdentityPartStore[]) {
    this.#shards = shards;
    this.#identities = identities;
  }

  #shardOf(dataSetId: string, recordKey: string): ViewStore {
    return this.#shards[recordShardOf(dataSetId, recordKey, this.#shards.length)]!;
  }

  #identityPartOf(dataSetId: string): IdentityPartStore {
    return this.#identities[partitionAmong(dataSetId, this.#identities.length)]!;
  }

  transaction<T>(_work: (tx: ViewTransaction) => Promise<T>): Promise<T> {
    throw new Error('a sharded view is written part by part');
  }

  async offset(consumer: string): Promise<number> {
    let min = Number.POSITIVE_INFINITY;
    for (const part of [...this.#shards, ...this.#identities]) min = Math.min(min, await part.offset(consumer));
    return min;
  }

  async #withIdentity(record: MergedRecord): Promise<MergedRecord> {
    const identityKey = await this.#identityPartOf(record.dataSetId).recordIdentity(record.dataSetId, record.recordKey);
    return identityKey === record.identityKey ? record : { ...record, identityKey };
  }

  async getRecord(dataSetId: string, recordKey: string): Promise<MergedRecord | null> {
    const record = await this.#shardOf(dataSetId, recordKey).getRecord(dataSetId, recordKey);
    return record && this.#withIdentity(record);
  }

  resolveIdentity(dataSetId: string, identityKey: string): Promise<string | null> {
    return this.#identityPartOf(dataSetId).resolveIdentity(dataSetId, identityKey);
  }

  getIdentity(dataSetId: string, identityKey: string): Promise<IdentityView | null> {
    return this.#identityPartOf(dataSetId).getIdentity(dataSetId, identityKey);
  }

  identityOfIdentifier(dataSetId: string, identifier: string): Promise<string | null> {
    return this.#identityPartOf(dataSetId).identityOfIdentifier(dataSetId, identifier);
  }

  /**
   * In order of first arrival over all shards: each shard exports its records in that order (a
   * shard writes new records in queue order), so the export merges the shards' streams by
   * first_seq, a page from each at a time (memory: a page per shard, not the data set).
   */
  async exportRecords(dataSetId: string, sinceMs: number, onPage: (records: MergedRecord[]) => void | Promise<void>): Promise<void> {
    const streams = this.#shards.map((shard) => new PageStream((take) => shard.exportRecords(dataSetId, sinceMs, take)));
    try {
      const heads = await Promise.all(streams.map((stream) => stream.next()));
      let page: MergedRecord[] = [];
      for (;;) {
        let k = -1;
        for (let i = 0; i < heads.length; i++) if (heads[i] && (k < 0 || heads[i]!.firstSeq < heads[k]!.firstSeq)) k = i;
        if (k < 0) break;
        page.push(await this.#withIdentity(heads[k]!));
        heads[k] = await streams[k]!.next();
        if (page.length === 1000) {
          await onPage(page);
          page = [];
        }
      }
      if (page.length > 0) await onPage(page);
    } finally {
      for (const stream of streams) stream.cancel();
    }
  }

  async counters(dataSetId: string, sinceHourMs: number): Promise<CounterRow[]> {
    const sums = new Map<string, CounterRow>();
    for (const shard of this.#shards) {
      for (const row of await shard.counters(dataSetId, sinceHourMs)) {
        const k = `${row.hour}\u0000${row.name}`;
        const sum = sums.get(k);
        sums.set(k, sum ? { ...sum, n: sum.n + row.n } : { ...row });
      }
    }
    return [...sums.values()].filter((row) => row.n !== 0);
  }

  heartbeat(beat: ConsumerHeartbeat): Promise<void> {
    return this.#identities[0]!.heartbeat(beat);
  }

  lastHeartbeat(consumer: string): Promise<ConsumerHeartbeat | null> {
    return this.#identities[0]!.lastHeartbeat(consumer);
  }

  async close(): Promise<void> {
    for (const part of [...this.#shards, ...this.#identities]) await part.close();
  }
}

/** Export cancelled by its reader (an error on another shard's stream). */
class ExportCancelled extends Error {}

/**
 * A shard's export (pages pushed to a callback that it awaits) read one record at a time: the
 * shard's export waits inside its callback until the page it gave has been read, so one page per
 * shard is in memory.
 */
class PageStream {
  #page: MergedRecord[] = [];
  #at = 0;
  #ended = false;
  #error: unknown = null;
  #cancelled = false;
  /** Resolves the reader waiting for the next page (or the end). */
  #ready: (() => void) | null = null;
  /** Resolves the shard's export waiting for its page to be read. */
  #consumed: (() => void) | null = null;

  constructor(run: (take: (page: MergedRecord[]) => Promise<void>) => Promise<void>) {
    run(async (page) => {
      if (this.#cancelled) throw new ExportCancelled();
      this.#page = page;
      this.#at = 0;
      const consumed = new Promise<void>((resolve) => (this.#consumed = resolve));
      this.#wake();
      await consumed;
      if (this.#cancelled) throw new ExportCancelled();
    }).then(
      () => {
        this.#ended = true;
        this.#wake();
      },
      (error: unknown) => {
        if (!(error instanceof ExportCancelled)) this.#error = error;
        this.#ended = true;
        this.#wake();
      },
    );
  }

  #wake(): void {
    const ready = this.#ready;
    this.#ready = null;
    ready?.();
  }

  /** The next record, or null at the end. */
  async next(): Promise<MergedRecord | null> {
    for (;;) {
      if (this.#at < this.#page.length) return this.#page[this.#at++]!;
      if (this.#error !== null) throw this.#error;
      if (this.#ended) return null;
      // The page is read: let the shard go on, and wait for its next page or its end.
      const waiting = new Promise<void>((resolve) => (this.#ready = resolve));
      const consumed = this.#consumed;
      this.#consumed = null;
      consumed?.();
      await waiting;
    }
  }

  cancel(): void {
    this.#cancelled = true;
    const consumed = this.#consumed;
    this.#consumed = null;
    consumed?.();
  }
}
