/**
 * The embedded profile's partition assignment: all P partitions of the view
 * (merged-view/sqlite-view-layout.ts), each stepped in a worker thread of its own
 * (sqlite-partition-thread.ts), or in this thread when P = 1. A thread that died (an uncaught
 * error, out of memory) is started again at the next step: its offset is in its view file, so it
 * resumes exactly where its last committed batch ended.
 */
import { dirname } from 'node:path';
import { Worker } from 'node:worker_threads';
import { lifecycleDbFile, SuppressionList } from '../lifecycle/sqlite-lifecycle-store.js';
import { SqliteViewStore } from '../merged-view/sqlite-view-store.js';
import { viewLayoutFiles, viewPartitionFile } from '../merged-view/sqlite-view-layout.js';
import { DEFAULT_HOT_LINKS } from '../merged-view/view-hot-state.js';
import { DEFAULT_POLICY } from '../control/data-set-policy.js';
import type { PartitionAssignment, PartitionStepper } from './consumer-loop.js';
import type { PartitionThreadData, PartitionThreadMessage } from './sqlite-partition-thread.js';
import { SqliteQueueSource } from './sqlite-queue-source.js';
import { ViewCheckpointer } from './sqlite-view-checkpointer.js';
import { ViewConsumer, type StepResult } from './view-consumer.js';

export interface SqlitePartitionsOptions {
  readonly queueFile: string;
  /** Partition 0's file (view.db). */
  readonly viewFile: string;
  readonly partitions: number;
  readonly batchSize: number;
  /** Identifier links each partition keeps in memory (merged-view/view-hot-state.ts; 0: none). Default DEFAULT_HOT_LINKS. */
  readonly hotLinks?: number;
  /** Merge windows by data set (ms). */
  readonly windows: () => readonly [string, number][];
  /**
   * The sharded layout (identity-stage-applier.ts): `partitions` record shards (`view-s<k>.db`)
   * and `partitions` identity parts (view.db, `view-p<k>.db`), a thread each.
   */
  readonly sharded?: boolean;
}

/** Young generation of each partition thread (V8 `resourceLimits.maxYoungGenerationSizeMb`). */
export const PARTITION_THREAD_YOUNG_GENERATION_MB = 16;

/** A partition applied in a worker thread. */
class ThreadPartition implements PartitionStepper {
  readonly name: string;
  readonly #data: PartitionThreadData;
  readonly #windows: () => readonly [string, number][];
  #worker: Worker | null = null;
  #nextId = 1;
  readonly #pending = new Map<number, { resolve: (r: StepResult) => void; reject: (e: Error) => void }>();

  constructor(data: PartitionThreadData, windows: () => readonly [string, number][]) {
    this.name = `${data.role === 'records' ? 's' : data.role === 'identities' ? 'i' : 'p'}${data.partition}`;
    this.#data = data;
    this.#windows = windows;
  }

  #thread(): Worker {
    if (this.#worker) return this.#worker;
    const worker = new Worker(new URL('./sqlite-partition-thread.js', import.meta.url), {
      workerData: this.#data,
      // The young generation is a large share of a partition thread's memory: V8's default on a large
      // machine is two 64 MB semi-spaces; 96 MB (32 MB semi-spaces) made the consumer the node's
      // largest process (issue 17). 32 MB showed no CPU cost per event against 96 (bench/README.md,
      // "Memory per process"), and 16 none against 32 (issue 30, third round: 93.5 / 103.3 against
      // 97.2 / 116.1 µs per event at a million events of one data set) for ~15-20 MB less peak RSS,
      // which pays for part of the hot links' table.
      resourceLimits: { maxYoungGenerationSizeMb: PARTITION_THREAD_YOUNG_GENERATION_MB },
    });
    worker.on('message', (message: { id: number; result?: StepResult; error?: string }) => {
      const pending = this.#pending.get(message.id);
      this.#pending.delete(message.id);
      if (message.error !== undefined) pending?.reject(new Error(message.error));
      else pending?.resolve(message.result!);
    });
    const fail = (error: Error) => {
      if (this.#worker === worker) this.#worker = null;
      for (const p of this.#pending.values()) p.reject(error);
      this.#pending.clear();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`partition thread ${this.name} exited (${code})`)));
    worker.postMessage({ type: 'windows', windows: this.#windows() } satisfies PartitionThreadMessage);
    this.#worker = worker;
    return worker;
  }

  sendWindows(): void {
    this.#worker?.postMessage({ type: 'windows', windows: this.#windows() } satisfies PartitionThreadMessage);
  }

  step(): Promise<StepResult> {
    const worker = this.#thread();
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      worker.postMessage({ type: 'step', id } satisfies PartitionThreadMessage);
    });
  }

  async close(): Promise<void> {
    const worker = this.#worker;
    if (!worker) return;
    this.#worker = null;
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    worker.postMessage({ type: 'close' } satisfies PartitionThreadMessage);
    // A thread that has not exited 5 s after 'close' is terminated. The timer is cleared once the
    // thread exits: left pending, it kept the consumer process (and a stopping `serve`) alive 5 s.
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([exited, new Promise((resolve) => (timer = setTimeout(resolve, 5000)))]);
    clearTimeout(timer);
    await worker.terminate();
  }
}

/**
 * The single partition of P = 1, applied in this thread. Its view connection opens at the first
 * step, as a partition thread's does: a file locked at that moment fails the step, which its lane
 * retries (consumer-loop.ts), rather than the worker's start.
 */
class LocalPartition implements PartitionStepper {
  readonly name = 'p0';
  readonly #options: SqlitePartitionsOptions;
  #store: SqliteViewStore | null = null;
  readonly #source: SqliteQueueSource;
  #consumer: ViewConsumer | null = null;
  readonly #suppressions: SuppressionList;

  constructor(options: SqlitePartitionsOptions) {
    this.#options = options;
    this.#source = new SqliteQueueSource(options.queueFile);
    this.#suppressions = new SuppressionList(lifecycleDbFile(dirname(options.viewFile)));
  }

  #open(): ViewConsumer {
    if (this.#consumer) return this.#consumer;
    const options = this.#options;
    this.#store = new SqliteViewStore(options.viewFile, { hotLinks: options.hotLinks ?? DEFAULT_HOT_LINKS });
    const defaultWindowMs = DEFAULT_POLICY.mergeWindowMs;
    this.#consumer = new ViewConsumer(this.#store, this.#source, {
      batchSize: options.batchSize,
      mergeWindowMs: (dataSetId) => new Map(options.windows()).get(dataSetId) ?? defaultWindowMs,
      suppressions: this.#suppressions,
    });
    return this.#consumer;
  }

  step(): Promise<StepResult> {
    return this.#open().step();
  }

  async close(): Promise<void> {
    this.#suppressions.close();
    await this.#source.close();
    await this.#store?.close();
  }
}

export class SqlitePartitions implements PartitionAssignment {
  readonly partitions: readonly (ThreadPartition | LocalPartition)[];
  readonly #checkpointer: ViewCheckpointer | null;

  constructor(options: SqlitePartitionsOptions) {
    if (options.sharded) {
      const n = options.partitions;
      const common = { queueFile: options.queueFile, partitions: n, batchSize: options.batchSize };
      const files = viewLayoutFiles(options.viewFile, { partitions: n, kind: 'sharded' });
      const shards = files.shards.map((viewFile, k) => new ThreadPartition({ ...common, viewFile, partition: k, role: 'records' }, options.windows));
      const identities = files.identityParts.map((viewFile, k) =>
        new ThreadPartition({ ...common, viewFile, partition: k, role: 'identities', hotLinks: options.hotLinks ?? DEFAULT_HOT_LINKS }, options.windows));
      this.#checkpointer = new ViewCheckpointer([...files.shards, ...files.identityParts]);
      this.partitions = [...identities, ...shards];
      return;
    }
    // With threads, this (main) thread is idle: it runs the checkpoints of their files.
    this.#checkpointer =
      options.partitions === 1 ? null : new ViewCheckpointer(Array.from({ length: options.partitions }, (_, p) => viewPartitionFile(options.viewFile, p)));
    this.partitions =
      options.partitions === 1
        ? [new LocalPartition(options)]
        : Array.from({ length: options.partitions }, (_, partition) =>
            new ThreadPartition(
              {
                queueFile: options.queueFile, viewFile: viewPartitionFile(options.viewFile, partition), partition, partitions: options.partitions,
                batchSize: options.batchSize, hotLinks: options.hotLinks ?? DEFAULT_HOT_LINKS,
              },
              options.windows,
            ));
  }

  async refresh(): Promise<readonly PartitionStepper[]> {
    return this.partitions;
  }

  /** Merge windows changed: tell the threads. */
  windowsChanged(): void {
    for (const p of this.partitions) if (p instanceof ThreadPartition) p.sendWindows();
  }

  async release(): Promise<void> {
    await Promise.all(this.partitions.map((p) => p.close()));
    this.#checkpointer?.close();
  }

  /** Applies every partition until none has anything more (benchmarks, tests); returns records applied. */
  async drain(): Promise<number> {
    const counts = await Promise.all(
      this.partitions.map(async (p) => {
        let n = 0;
        for (;;) {
          const r = await p.step();
          if (!r.moved) return n;
          n += r.records;
        }
      }),
    );
    return counts.reduce((a, b) => a + b, 0);
  }
}
