/**
 * The read side of a view split into partitions by data set (sqlite-view-layout.ts): every read
 * names its data set, so it goes to that data set's partition; the consumer offset the CLI and the
 * lag see is the lowest of the partitions' (nothing below it is unapplied anywhere); heartbeats live
 * in partition 0. Writes go to the partitions directly (one consumer thread per partition), never
 * through here.
 */
import type { CounterRow } from '../model/hourly-counters.js';
import { partitionAmong } from '../model/data-set-partition.js';
import { prepareViewFile, SqliteViewStore } from './sqlite-view-store.js';
import { viewLayoutFiles, type ViewLayout } from './sqlite-view-layout.js';
import { ShardedViewStore } from './sharded-view-store.js';
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
    return parts[partitionAmong(dataSetId, parts.length)]!;
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
 * The embedded view's read side: view.db, and its other files once the layout says there are more
 * (sqlite-view-layout.ts; re-checked on each call until it is recorded): partitions by data set
 * (read through PartitionedViewStore), or record shards and identity parts (the sharded layout,
 * read through ShardedViewStore).
 */
export class SqlitePartitionedView implements ViewStore {
  readonly #file: string;
  readonly #first: SqliteViewStore;
  #inner: ViewStore | null = null;
  #opened: SqliteViewStore[] = [];

  constructor(viewFile: string) {
    this.#file = viewFile;
    this.#first = new SqliteViewStore(viewFile);
  }

  /** The store reads go to: partition 0 alone until a layout is recorded. */
  #view(): ViewStore {
    if (this.#inner) return this.#inner;
    const layout = this.#first.recordedLayout();
    if (layout === null) return this.#first;
    const { identityParts, shards } = viewLayoutFiles(this.#file, layout);
    const opened: SqliteViewStore[] = [];
    const open = (file: string) => {
      const store = new SqliteViewStore(file);
      opened.push(store);
      return store;
    };
    try {
      const parts = [this.#first, ...identityParts.slice(1).map(open)];
      this.#inner = layout.kind === 'sharded' ? new ShardedViewStore(shards.map(open), parts) : new PartitionedViewStore(parts);
    } catch (error) {
      for (const store of opened) void store.close(); // a locked file: the next call opens them again
      throw error;
    }
    this.#opened = opened;
    return this.#inner;
  }

  /**
   * Opens every file of the recorded layout now rather than at the first read: a file an earlier
   * version wrote is migrated as it opens (identifier-link-columns.ts), which the serving process
   * does once at its start (storage/sqlite-storage.ts prepareFiles), not on its event loop later.
   */
  openFiles(): void {
    this.#view();
  }

  /** The recorded layout, or null while none is. */
  layout(): ViewLayout | null {
    return this.#first.recordedLayout();
  }

  /**
   * The view's layout: the recorded one, else `requested`, recorded now (sqlite-view-layout.ts).
   * The other files are created (WAL, schema) before the layout names them: a reader that sees the
   * layout (`worker status`, the admin port) opens them at once, and two connections switching one
   * brand-new file to WAL at the same moment can fail with "database is locked" at once, without
   * waiting for the busy timeout (consumer/sqlite-busy.ts).
   */
  fixLayout(requested: ViewLayout): ViewLayout {
    if (this.#first.recordedLayout() === null) {
      const { identityParts, shards } = viewLayoutFiles(this.#file, requested);
      for (const file of [...identityParts.slice(1), ...shards]) prepareViewFile(file);
    }
    return this.#first.fixLayout(requested);
  }

  transaction<T>(work: (tx: ViewTransaction) => Promise<T>): Promise<T> {
    return this.#view().transaction(work);
  }

  offset(consumer: string): Promise<number> {
    return this.#view().offset(consumer);
  }

  getRecord(dataSetId: string, recordKey: string): Promise<MergedRecord | null> {
    return this.#view().getRecord(dataSetId, recordKey);
  }

  resolveIdentity(dataSetId: string, identityKey: string): Promise<string | null> {
    return this.#view().resolveIdentity(dataSetId, identityKey);
  }

  getIdentity(dataSetId: string, identityKey: string): Promise<IdentityView | null> {
    return this.#view().getIdentity(dataSetId, identityKey);
  }

  identityOfIdentifier(dataSetId: string, identifier: string): Promise<string | null> {
    return this.#view().identityOfIdentifier(dataSetId, identifier);
  }

  exportRecords(dataSetId: string, sinceMs: number, onPage: (records: MergedRecord[]) => void | Promise<void>): Promise<void> {
    return this.#view().exportRecords(dataSetId, sinceMs, onPage);
  }

  counters(dataSetId: string, sinceHourMs: number): Promise<CounterRow[]> {
    return this.#view().counters(dataSetId, sinceHourMs);
  }

  heartbeat(beat: ConsumerHeartbeat): Promise<void> {
    return this.#first.heartbeat(beat);
  }

  lastHeartbeat(consumer: string): Promise<ConsumerHeartbeat | null> {
    return this.#first.lastHeartbeat(consumer);
  }

  async close(): Promise<void> {
    for (const store of this.#opened) await store.close();
    await this.#first.close();
  }

  /** Partition 0 (view.db). */
  get first(): SqliteViewStore {
    return this.#first;
  }
}
