/**
 * The read side of a sharded view (consumer/identity-stage-applier.ts): P record shards (merged
 * records and counters, by record key) and P identity parts (identities and each record's
 * identity key, by data set). A record is read from its shard and its identity key from its data
 * set's identity part, resolved there; counters are summed over the shards; an export merges the
 * shards' records in order of first arrival (first_seq: a shard writes its new records in that
 * order). The consumer offset the CLI and the lag see is the lowest of all parts'; heartbeats live
 * in identity part 0.
 *
 * Hazard: the parts are read one after another, not in one snapshot, and each may be at another
 * queue position while the consumer runs: a record just merged may show its identity as it was
 * before (or none yet), and counters may sum shards at different positions. Once every part has
 * applied the queue the reads are exact (as a data-set partitioned view's are across data sets).
 */
import type { CounterRow } from '../analytics/hourly.js';
import { partitionOf } from '../consumer/data-set-partition.js';
import { recordShardOf } from '../consumer/record-shard.js';
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
    return this.#identities[partitionOf(dataSetId, this.#identities.length)]!;
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
   * In order of first arrival over all shards. Not streamed yet: each shard's records of the data
   * set are collected, then merged (memory in proportion to the data set's records; the worker's
   * integration needs a cursor per shard instead).
   */
  async exportRecords(dataSetId: string, sinceMs: number, onPage: (records: MergedRecord[]) => void | Promise<void>): Promise<void> {
    const all: MergedRecord[] = [];
    for (const shard of this.#shards) await shard.exportRecords(dataSetId, sinceMs, (page) => void all.push(...page));
    all.sort((a, b) => a.firstSeq - b.firstSeq);
    for (let i = 0; i < all.length; i += 1000) {
      const page: MergedRecord[] = [];
      for (const record of all.slice(i, i + 1000)) page.push(await this.#withIdentity(record));
      await onPage(page);
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
