/**
 * Model-based test of the batch applier: random queues (re-sends, events without id, shared and
 * changing identifiers, two data sets with different merge windows, arrivals over several hours,
 * measurement-only events) applied by the real consumer on real SQLite view stores, with random
 * batch sizes, 1, 2 or 4 partitions stepped in a random interleaving, and batches that fail before
 * their commit (and are applied again), must give, read through the partitioned view, what a
 * naive record-at-a-time reference of docs/guides/merged-view.md's rules gives (test/helpers/reference-view.ts):
 * every merged record, every identity key, every counter. The stores keep their hot state across
 * batches (merged-view/view-hot-state.ts) with random bounds (evictions included). The sharded
 * layout's property also queues each record with the merge window it was accepted under, changing
 * over the queue, while the window the parts have at apply time drifts: the view must follow the
 * queued windows (view-applier.ts mergeWindowOf), whatever positions the parts are at.
 *
 * Another property checks that the hot state is transparent when the file changes under it: the
 * lifecycle's erasers (lifecycle/sqlite-view-eraser.ts: a record deleted, an identity forgotten,
 * retention) run on their own connection between random batches, batches roll back, and the view
 * of a consumer keeping hot state must equal, table by table, that of one keeping none.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import fc from 'fast-check';
import { SqliteViewStore } from '../../src/merged-view/sqlite-view-store.js';
import { ViewConsumer, type BatchApplier, type QueueBatch, type QueueSource } from '../../src/consumer/view-consumer.js';
import { applyRecordShard } from '../../src/consumer/record-shard-applier.js';
import { applyIdentityStage } from '../../src/consumer/identity-stage-applier.js';
import { queuedRecordShard } from '../../src/merged-view/record-shard.js';
import { ShardedViewStore } from '../../src/merged-view/sharded-view-store.js';
import { partitionAmong } from '../../src/model/data-set-partition.js';
import { PartitionedViewStore } from '../../src/merged-view/partitioned-view-store.js';
import type { ViewStore } from '../../src/merged-view/view-store.js';
import type { QueueRecord } from '../../src/queue/event-queue.js';
import { assertViewMatches, ReferenceView } from '../helpers/reference-view.js';
import { SqliteViewEraser } from '../../src/lifecycle/sqlite-view-eraser.js';
import { holdPartsTogether, releaseParts } from '../../src/lifecycle/parts-fence.js';
import { identifiersOf, normalizeEvent } from '../../src/merged-view/identity.js';
import { dumpFile } from '../helpers/view-dump.js';
import { tempDataDir } from '../helpers/server-process.js';
import { failingStore, modelEvent, queuedEventFields } from '../helpers/model-queued-events.js';

const HOUR = 3_600_000;
const T0 = Date.UTC(2025, 4, 6, 19, 40);
const WINDOWS: Record<string, number> = { 'ds-a': 7 * 24 * HOUR, 'ds-b': HOUR };
const windowMs = (dataSetId: string) => WINDOWS[dataSetId] ?? 7 * 24 * HOUR;

const queuedEvent = fc.record({ dataSetId: fc.constantFrom('ds-a', 'ds-b'), ...queuedEventFields });

type QueuedEvent = typeof queuedEvent extends fc.Arbitrary<infer T> ? T : never;

/**
 * The queued records of `items`. `queuedWindow`: the merge window record i was accepted under
 * (queue/event-queue.ts), or none: records queued before queues kept it, decided by the consumer's
 * window of the data set.
 */
function toQueue(items: QueuedEvent[], queuedWindow?: (i: number) => number): QueueRecord[] {
  let at = T0;
  return items.map((it, i) => {
    at += it.advance * 60_000;
    const { event, meta } = modelEvent(it, i, it.dataSetId);
    return {
      seq: i + 1, received_at: at, data_set_id: it.dataSetId, key_id: 'key_test', request_id: `r${i}`, policy_version: 1, event,
      ...(queuedWindow ? { merge_window_ms: queuedWindow(i) } : {}),
      ...(meta ? { meta } : {}),
    } as QueueRecord;
  });
}

/** The queue as one partition (or part) sees it: other partitions' records skipped, the offset moved past them. */
class PartitionSource implements QueueSource {
  constructor(private readonly records: readonly QueueRecord[], private readonly accept: (dataSetId: string, record: QueueRecord) => boolean) {}
  async read(fromSeq: number, limit: number): Promise<QueueRecord[]> {
    return (await this.readBatch(fromSeq, limit)).records;
  }
  async readBatch(fromSeq: number, limit: number): Promise<QueueBatch> {
    const out: QueueRecord[] = [];
    let nextSeq = fromSeq;
    for (const r of this.records) {
      if (r.seq < fromSeq) continue;
      if (out.length === limit) break;
      if (this.accept(r.data_set_id, r)) out.push(r);
      nextSeq = r.seq + 1;
    }
    return { records: out, nextSeq };
  }
  async close(): Promise<void> {}
}

/**
 * Applies the queue with `stores.length` partitions (one consumer per partition, stepped in the
 * order `schedule` says, batches failing as `failures` says) until every partition is done.
 */
async function applyAll(stores: ViewStore[], records: QueueRecord[], batchSize: number, failures: boolean[], schedule: number[]): Promise<void> {
  await applyParts(
    stores.map((store, partition) => ({ store, accept: (ds: string) => partitionAmong(ds, stores.length) === partition })),
    records, batchSize, failures, schedule,
  );
}

/** A part of a view: its store, the queued records it applies, and how (default: view-applier.ts). */
interface Part {
  readonly store: ViewStore;
  readonly accept: (dataSetId: string, record: QueueRecord) => boolean;
  readonly applier?: BatchApplier;
}

/** The sharded layout's 2P parts over these stores: P record shards, then P identity parts. */
function shardedParts(shards: readonly ViewStore[], identities: readonly ViewStore[]): Part[] {
  const p = shards.length;
  return [
    ...shards.map((store, k): Part => ({ store, accept: (_ds, r) => queuedRecordShard(r, p) === k, applier: applyRecordShard })),
    ...identities.map((store, k): Part => ({ store, accept: (ds) => partitionAmong(ds, p) === k, applier: applyIdentityStage })),
  ];
}

/**
 * Applies the queue with one consumer per part, stepped in the order `schedule` says, batches
 * failing as `failures` says, until every part is done.
 */
async function applyParts(
  parts: readonly Part[],
  records: QueueRecord[],
  batchSize: number,
  failures: boolean[],
  schedule: number[],
  until: { turns?: number; offset?: number; mergeWindowMs?: (dataSetId: string) => number } = {},
): Promise<void> {
  const stores = parts.map((p) => p.store);
  let f = 0;
  const failNext = () => f < failures.length && failures[f++] === true;
  const consumers = parts.map((part) =>
    new ViewConsumer(failingStore(part.store, failNext), new PartitionSource(records, part.accept), {
      batchSize,
      mergeWindowMs: until.mergeWindowMs ?? windowMs,
      ...(part.applier ? { applier: part.applier } : {}),
    }));
  const done = new Set<number>();
  for (let turn = 0; done.size < consumers.length; turn++) {
    assert.ok(turn < 100_000, 'consumers did not finish');
    if (until.turns !== undefined && turn >= until.turns) return;
    const pending = consumers.map((_, p) => p).filter((p) => !done.has(p));
    const partition = pending[(schedule.length > 0 ? schedule[turn % schedule.length]! + turn : turn) % pending.length]!;
    try {
      const result = await consumers[partition]!.step();
      if (!result.moved) done.add(partition);
    } catch {
      // the batch rolled back; the consumer reads it again
    }
  }
  for (const store of stores) assert.equal(await store.offset('merged-view'), until.offset ?? records.length + 1);
}

async function assertMatchesReference(store: ViewStore, records: QueueRecord[]): Promise<void> {
  const reference = new ReferenceView(windowMs);
  for (const r of records) reference.apply(r);
  await assertViewMatches(store, reference, ['ds-a', 'ds-b']);
}

test('batch applier = record-at-a-time reference, whatever the batch size, partition count (1, 2, 4) and failed batches', { timeout: 300_000 }, async () => {
  const dir = tempDataDir('ecapi-model-');
  let run = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.array(queuedEvent, { minLength: 1, maxLength: 60 }),
      fc.integer({ min: 1, max: 70 }),
      fc.array(fc.boolean(), { maxLength: 6 }),
      fc.constantFrom(1, 2, 4),
      fc.array(fc.nat(3), { maxLength: 8 }),
      fc.constantFrom(0, 1, 3, 10, 100_000),
      async (items, batchSize, failures, partitions, schedule, hotLinks) => {
        const records = toQueue(items);
        const n = run++;
        const stores = Array.from({ length: partitions }, (_, p) => new SqliteViewStore(join(dir, `view-${n}-p${p}.db`), { hotLinks }));
        const view = new PartitionedViewStore(stores);
        try {
          await applyAll(stores, records, batchSize, failures, schedule);
          await assertMatchesReference(view, records);
        } finally {
          await view.close();
        }
      },
    ),
    { numRuns: Number(process.env.MODEL_RUNS ?? 150) },
  );
});

const EXAMPLE: QueuedEvent = {
  dataSetId: 'ds-b', id: undefined, advance: 0, eventType: 'purchase', source: undefined, value: undefined, currency: 'USD',
  userData: undefined, consentMmt: false, segments: undefined,
};

const WINDOW_CHOICES = [0, 20 * 60_000, HOUR, 7 * 24 * HOUR];

test('sharded layout (record shards + identity stage) = record-at-a-time reference, whatever P (1, 2, 4), batch sizes, interleavings of the parts, failed batches and policy changes between parts', { timeout: 300_000 }, async () => {
  const dir = tempDataDir('ecapi-model-sharded-');
  let run = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.array(queuedEvent, { minLength: 1, maxLength: 60 }),
      fc.integer({ min: 1, max: 70 }),
      fc.array(fc.boolean(), { maxLength: 6 }),
      fc.constantFrom(1, 2, 4),
      fc.array(fc.nat(7), { maxLength: 12 }),
      // null: records queued without their window (before queues kept it), decided by the data set's
      // window of the parts (constant). Otherwise the data sets' policies over the queue, the window
      // changing every `epoch` records and queued with them, while the window each part has at apply
      // time moves on with every batch, as a policy changed while the parts are at different queue
      // positions would: what it says must not matter.
      fc.option(fc.record({ windows: fc.array(fc.constantFrom(...WINDOW_CHOICES), { minLength: 1, maxLength: 6 }), epoch: fc.integer({ min: 1, max: 12 }) }), { nil: null }),
      async (items, batchSize, failures, p, schedule, policies) => {
        const records = policies ? toQueue(items, (i) => policies.windows[Math.floor(i / policies.epoch) % policies.windows.length]!) : toQueue(items);
        const n = run++;
        const shards = Array.from({ length: p }, (_, k) => new SqliteViewStore(join(dir, `view-${n}-s${k}.db`)));
        const identities = Array.from({ length: p }, (_, k) => new SqliteViewStore(join(dir, `view-${n}-i${k}.db`)));
        const view = new ShardedViewStore(shards, identities);
        let asked = 0;
        const drifting = () => WINDOW_CHOICES[asked++ % WINDOW_CHOICES.length]!;
        try {
          await applyParts(shardedParts(shards, identities), records, batchSize, failures, schedule, policies ? { mergeWindowMs: drifting } : {});
          await assertMatchesReference(view, records);
        } finally {
          await view.close();
        }
      },
    ),
    {
      numRuns: Number(process.env.MODEL_RUNS ?? 200),
      examples: [
        // A re-send that arrived before the first copy moves first_received_at back, so that a third
        // copy 61 minutes after it (59 after the first) is past ds-b's 1 h window: the identity stage
        // must keep first_received_at as the shard does, or it links what the shard discarded.
        [
          [
            { ...EXAMPLE, id: 'e1', advance: 0 },
            { ...EXAMPLE, id: 'e1', advance: -2 },
            { ...EXAMPLE, id: 'e1', advance: 61, userData: { customer_identifier: 'cust-2' } },
          ],
          70, [], 2, [], null,
        ],
        // A re-send 30 minutes after its first copy, accepted under a 20-minute window (discarded),
        // then one under a 1 h window (merged): each part decides them by the window queued with
        // them, not by its own.
        [
          [
            { ...EXAMPLE, id: 'e1', advance: 0 },
            { ...EXAMPLE, id: 'e1', advance: 30, userData: { customer_identifier: 'cust-2' } },
            { ...EXAMPLE, id: 'e1', advance: 1, userData: { customer_identifier: 'cust-3' } },
          ],
          1, [], 2, [0, 3, 1], { windows: [20 * 60_000, HOUR], epoch: 2 },
        ],
      ],
    },
  );
});

test('sharded layout held at one queue position (the lifecycle fence) = the reference up to it, and once released = the whole reference', { timeout: 300_000 }, async () => {
  const dir = tempDataDir('ecapi-model-fence-');
  let run = 0;
  /** Runs where the parts were at different positions when held: the property must not hold vacuously. */
  let apart = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.array(queuedEvent, { minLength: 1, maxLength: 60 }),
      fc.integer({ min: 1, max: 70 }),
      fc.array(fc.boolean(), { maxLength: 6 }),
      fc.constantFrom(1, 2, 4),
      fc.array(fc.nat(7), { maxLength: 12 }),
      fc.nat(40),
      async (items, batchSize, failures, p, schedule, turnsBefore) => {
        const records = toQueue(items);
        const n = run++;
        const shardFiles = Array.from({ length: p }, (_, k) => join(dir, `view-${n}-s${k}.db`));
        const identityFiles = Array.from({ length: p }, (_, k) => join(dir, `view-${n}-i${k}.db`));
        const shards = shardFiles.map((file) => new SqliteViewStore(file));
        const identities = identityFiles.map((file) => new SqliteViewStore(file));
        const view = new ShardedViewStore(shards, identities);
        const parts = shardedParts(shards, identities);
        const fences = [...shardFiles, ...identityFiles].map((file) => new SqliteViewEraser(file));
        try {
          // The parts go their own ways for a while (failed batches included), then are held together.
          await applyParts(parts, records, batchSize, failures, schedule, { turns: turnsBefore });
          if (new Set(fences.map((f) => f.offset())).size > 1) apart++;
          let rounds = 0;
          const upTo = await holdPartsTogether(fences, 7, async () => {
            assert.ok(rounds++ < 1000, `the parts did not come together: ${fences.map((f) => `${f.offset()}/${f.fence()?.upToSeq}`).join(' ')}`);
            // (Each applyParts call injects `failures` from its start again: not here, where a round is short.)
            await applyParts(parts, records, batchSize, [], schedule, { turns: parts.length });
          });
          // Held: stepping on moves no part past the position, and the view is one applier's there.
          await applyParts(parts, records, batchSize, failures, schedule, { offset: upTo + 1 });
          await assertMatchesReference(view, records.filter((r) => r.seq <= upTo));
          // Holding again (a worker that died while holding) finds the same position.
          assert.equal(await holdPartsTogether(fences, 7, async () => assert.fail('the parts are already together')), upTo);
          await releaseParts(fences);
          await applyParts(parts, records, batchSize, failures, schedule);
          await assertMatchesReference(view, records);
        } finally {
          for (const fence of fences) fence.close();
          await view.close();
        }
      },
    ),
    { numRuns: Number(process.env.MODEL_RUNS ?? 150) },
  );
  assert.ok(apart > run / 10, `the parts were apart when held in ${apart} of ${run} runs`);
});

test('a fence set while a batch is read stops that batch at it (checked again under the write lock)', async () => {
  const dir = tempDataDir('ecapi-fence-race-');
  const records = toQueue(Array.from({ length: 10 }, (_, i) => ({ ...EXAMPLE, id: `e${i}` })));
  const file = join(dir, 'view.db');
  const store = new SqliteViewStore(file);
  const fence = new SqliteViewEraser(file);
  try {
    let onRead: () => void = () => {};
    const inner = new PartitionSource(records, () => true);
    const source: QueueSource = {
      read: (from, limit) => inner.read(from, limit),
      readBatch: async (from, limit) => {
        const batch = await inner.readBatch(from, limit);
        onRead(); // the lifecycle sets the fence after the consumer's first look at it
        return batch;
      },
      close: async () => {},
    };
    const consumer = new ViewConsumer(store, source, { batchSize: 4, mergeWindowMs: windowMs });
    assert.equal((await consumer.step()).nextSeq, 5);
    onRead = () => fence.holdAt(6, 1);
    const cut = await consumer.step();
    assert.deepEqual([cut.records, cut.nextSeq, await store.offset('merged-view')], [2, 7, 7]);
    onRead = () => {};
    assert.equal((await consumer.step()).moved, false, 'held at the fence');
    fence.releaseFence();
    onRead = () => void fence.freeze(1);
    const frozen = await consumer.step();
    assert.deepEqual([frozen.moved, await store.offset('merged-view')], [false, 7]);
    fence.releaseFence();
    onRead = () => {};
    await consumer.drain();
    assert.equal(await store.offset('merged-view'), 11);
    await assertMatchesReference(store, records);
  } finally {
    fence.close();
    await store.close();
  }
});

const lifecycleOp = fc.record({
  /** Before which step of the consumers it runs. */
  atStep: fc.nat(15),
  kind: fc.constantFrom('delete-record', 'forget-identity', 'retention'),
  /** Which applied record names the target (its key, or its first identifier). */
  pick: fc.nat(),
});

/** One lifecycle change on a view file, through the real eraser (its own connection). */
async function runLifecycleOp(eraser: SqliteViewEraser, op: { kind: string; pick: number }, records: readonly QueueRecord[], requestId: number): Promise<void> {
  const bound = eraser.offset() - 1;
  if (bound === 0) return;
  const record = records[op.pick % bound]!;
  const dataSetId = record.data_set_id;
  if (op.kind === 'retention') {
    await eraser.expire(dataSetId, record.received_at, 1000);
  } else if (op.kind === 'delete-record') {
    const id = (record.event as { id?: string }).id;
    await eraser.deleteRecord(requestId, dataSetId, id !== undefined ? `id:${id}` : `seq:${record.seq}`, bound);
  } else {
    const identifier = identifiersOf(normalizeEvent(record.event))[0];
    if (identifier === undefined) return;
    const identity = await eraser.findIdentity(dataSetId, { identifier });
    if (!identity) return;
    let after: number | null = 0;
    while (after !== null) ({ next: after } = await eraser.deleteIdentityRecords(requestId, dataSetId, { root: identity.root, keys: new Set(identity.keys) }, bound, after, 1000));
    await eraser.deleteIdentity(requestId, dataSetId, identity.root);
  }
}

test('hot state is transparent: erasers between batches and rolled-back batches give the view of a consumer without hot state', { timeout: 300_000 }, async () => {
  const dir = tempDataDir('ecapi-model-hot-');
  let run = 0;
  /** Lookups the hot state answered, and its full loads (after a start or a clear), over all runs: the property must not hold vacuously. */
  let hits = 0;
  let loads = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.array(queuedEvent, { minLength: 1, maxLength: 60 }),
      fc.integer({ min: 1, max: 12 }),
      fc.array(fc.boolean(), { maxLength: 8 }),
      fc.constantFrom(1, 4, 100_000),
      fc.array(lifecycleOp, { maxLength: 8 }),
      // The tables' chain bound: 1 and 2 make them give up (a data set dropped from the hot state
      // while loading, or while a batch's links are added after its commit).
      fc.constantFrom(undefined, 1, 2),
      async (items, batchSize, failures, hotLinks, ops, maxProbe) => {
        const records = toQueue(items);
        const n = run++;
        const files = [join(dir, `hot-${n}.db`), join(dir, `cold-${n}.db`)] as const;
        const hot = new SqliteViewStore(files[0], maxProbe === undefined ? { hotLinks } : { hotLinks, hotTableMaxProbe: maxProbe });
        const cold = new SqliteViewStore(files[1]);
        const erasers = files.map((file) => new SqliteViewEraser(file));
        let f = 0;
        const failNext = () => f < failures.length && failures[f++] === true;
        const source = () => new PartitionSource(records, () => true);
        // After a rolled-back batch both consumers go on with other batch sizes (a restarted worker
        // with another --batch-size): the batch applied again is not the one rolled back, so what the
        // rolled-back attempt would have linked must not be in the hot state.
        const consumers = (size: number) => [
          new ViewConsumer(failingStore(hot, failNext), source(), { batchSize: size, mergeWindowMs: windowMs }),
          new ViewConsumer(cold, source(), { batchSize: size, mergeWindowMs: windowMs }),
        ] as const;
        let [hotConsumer, coldConsumer] = consumers(batchSize);
        let retries = 0;
        try {
          // Both consumers are at the same offset at the start of every step: an operation runs on
          // both files at the same point of the queue.
          for (let step = 0, requestId = 1; ; step++) {
            assert.ok(step < 10_000, 'consumers did not finish');
            for (const op of ops) if (op.atStep === step) for (const eraser of erasers) await runLifecycleOp(eraser, op, records, requestId++);
            let result;
            try {
              result = await hotConsumer.step();
            } catch {
              // Rolled back before its commit: both go on from the same offset with another batch size.
              [hotConsumer, coldConsumer] = consumers(1 + ((batchSize + ++retries) % 12));
              continue;
            }
            const coldResult = await coldConsumer.step();
            assert.equal(result.nextSeq, coldResult.nextSeq);
            if (!result.moved) break;
          }
          assert.deepEqual(dumpFile(files[0], { rowids: true }), dumpFile(files[1], { rowids: true }));
          const stats = hot.hotStats()!;
          hits += stats.hits;
          loads += stats.loads;
        } finally {
          for (const eraser of erasers) eraser.close();
          await hot.close();
          await cold.close();
        }
      },
    ),
    { numRuns: Number(process.env.MODEL_RUNS ?? 150) },
  );
  assert.ok(hits > 0 && loads > run, `the hot state answered ${hits} lookups and loaded ${loads} times over ${run} runs`);
});
