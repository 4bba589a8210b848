/**
 * The read side of a view split into partitions by data set (sqlite-view-layout.ts): every read
 * names its data set, so it goes to that data set's partition; the consumer offset the CLI and the
 * lag see is the lowest of the partitions' (nothing below it is unapplied anywhere); heartbeats live
 * in partition 0. Writes go to the partitions directly (one consumer thread per partition), never
 * through here.
 */
import type { CounterRow } from '../analytics/hourly.js';
import { partitionOf } from '../consumer/data-set-partition.js';
import { prepareViewFile, SqliteViewStore } from './sqlite-view-store.js';
import { viewPartitionFile } from './sqlite-view-layout.js';
import type { ConsumerHeartbeat, IdentityView, MergedRecord, ViewStore, ViewTransaction } from './view-store.js';

export class PartitionedViewStore implements ViewStore {
  readonly #fixed: readonly ViewStore[];

  constructor(parts: readonly ViewStore[] = []) {
    this.#fixed = parts;
  }

  /** The partitions, asked on every call (a subclass may find them late). */
  protected parts(): readonly ViewStore[] {
    return this.#fixed;
  }

  get #parts(): readonly ViewStore[] {
    return this.parts();
  }

  #of(dataSetId: string): ViewStore {
    const parts = this.#parts;
    return parts[partitionOf(dataSetId, parts.length)]!;
  }

  transaction<T>(work: (tx: ViewTransaction) => Promise<T>): Promise<T> {
    if (this.#parts.length === 1) return this.#parts[0]!.transaction(work);
    throw new Error('a partitioned view is written partition by partition');
  }

  async offset(consumer: string): Promise<number> {
    let min = Number.POSITIVE_INFINITY;
    for (const part of this.#parts) min = Math.min(min, await part.offset(consumer));
    return min;
  }

  getRecord(dataSetId: string, recordKey: string): Promise<MergedRecord | null> {
    return this.#of(dataSetId).getRecord(dataSetId, recordKey);
  }

  resolveIdentity(dataSetId: string, identityKey: string): Promise<string | null> {
    return this.#of(dataSetId).resolveIdentity(dataSetId, identityKey);
  }

  getIdentity(dataSetId: string, identityKey: string): Promise<IdentityView | null> {
    return this.#of(dataSetId).getIdentity(dataSetId, identityKey);
  }

  identityOfIdentifier(dataSetId: string, identifier: string): Promise<string | null> {
    return this.#of(dataSetId).identityOfIdentifier(dataSetId, identifier);
  }

  exportRecords(dataSetId: string, sinceMs: number, onPage: (records: MergedRecord[]) => void | Promise<void>): Promise<void> {
    return this.#of(dataSetId).exportRecords(dataSetId, sinceMs, onPage);
  }

  counters(dataSetId: string, sinceHourMs: number): Promise<CounterRow[]> {
    return this.#of(dataSetId).counters(dataSetId, sinceHourMs);
  }

  heartbeat(beat: ConsumerHeartbeat): Promise<void> {
    return this.#parts[0]!.heartbeat(beat);
  }

  lastHeartbeat(consumer: string): Promise<ConsumerHeartbeat | null> {
    return this.#parts[0]!.lastHeartbeat(consumer);
  }

  async close(): Promise<void> {
    for (const part of this.#parts) await part.close();
  }
}

/**
 * The embedded view's read side: view.db, and its partition files once the layout says there are
 * more (sqlite-view-layout.ts; re-checked on each call until it is recorded).
 */
export class SqlitePartitionedView extends PartitionedViewStore {
  readonly #file: string;
  readonly #first: SqliteViewStore;
  #parts: SqliteViewStore[] | null = null;

  constructor(viewFile: string) {
    super();
    this.#file = viewFile;
    this.#first = new SqliteViewStore(viewFile);
  }

  protected override parts(): readonly SqliteViewStore[] {
    if (this.#parts) return this.#parts;
    const n = this.#first.recordedPartitions();
    if (n === null) return [this.#first];
    const parts = [this.#first];
    try {
      for (let p = 1; p < n; p++) parts.push(new SqliteViewStore(viewPartitionFile(this.#file, p)));
    } catch (error) {
      for (const part of parts.slice(1)) void part.close(); // a locked file: the next call opens them again
      throw error;
    }
    this.#parts = parts;
    return parts;
  }

  /**
   * The view's partition count: the recorded one, else `requested`, recorded now
   * (sqlite-view-layout.ts). The partition files are created (WAL, schema) before the layout names
   * them: a reader that sees the layout (`worker status`, the admin port) opens them at once, and
   * two connections switching one brand-new file to WAL at the same moment can fail with "database
   * is locked" at once, without waiting for the busy timeout (storage/sqlite-busy.ts).
   */
  fixPartitions(requested: number): number {
    if (this.#first.recordedPartitions() === null) for (let p = 1; p < requested; p++) prepareViewFile(viewPartitionFile(this.#file, p));
    return this.#first.fixPartitions(requested);
  }

  /** Partition 0 (view.db). */
  get first(): SqliteViewStore {
    return this.#first;
  }
}
