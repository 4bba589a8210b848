/**
 * Model-based test of the sharded layout on PostgreSQL (merged-view/postgres-view-layout.ts,
 * consumer/identity-stage-applier.ts), the PostgreSQL twin of the sharded properties of
 * batch-applier-model.test.ts: random queues (one or two data sets, in one queue partition or two;
 * re-sends, events without id, shared and changing identifiers, two merge windows, arrivals over
 * several hours, measurement-only events) appended to the real PostgresEventQueue, applied by the
 * real lanes (postgres-partitions.ts `laneConsumer`: per queue partition an identity part and S = 1,
 * 2 or 4 record shards) stepped in random interleavings with random batch sizes, some batches
 * rolled back before their commit. Then:
 * (a) each chosen partition's lanes are held at one queue position (parts-fence.ts
 *     `holdPartsTogether` over lifecycle/postgres-fenced-part.ts, as the lifecycle holds them):
 *     stepping on moves no held lane past it (the others drain), and the view read through
 *     PostgresViewStore (records with their resolved identity, identities, counters summed over the
 *     shards) is the record-at-a-time reference (test/helpers/reference-view.ts) of the queue up to
 *     that position for the held data sets, of the whole queue for the others;
 * (b) released and drained: the reference of the whole queue, every lane at its partition's end,
 *     no fence left.
 * Each run gets a fresh schema. Skipped without ECAPI_TEST_DATABASE_URL.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createPool, migrate, schemaOf, type Pool } from '../../src/postgres/database.js';
import { PostgresEventQueue, readSegments } from '../../src/queue/postgres-event-queue.js';
import { PostgresViewStore } from '../../src/merged-view/postgres-view-store.js';
import { fixPostgresViewLayout, partitionLanes, type ViewLane } from '../../src/merged-view/postgres-view-layout.js';
import { laneConsumer, sharedPartitionReads } from '../../src/consumer/postgres-partitions.js';
import { queuePartitionOf } from '../../src/postgres/partitions.js';
import { PostgresFencedPart } from '../../src/lifecycle/postgres-fenced-part.js';
import { holdPartsTogether, releaseParts } from '../../src/lifecycle/parts-fence.js';
import { ViewConsumer, type QueueSource } from '../../src/consumer/view-consumer.js';
import { applyIdentityStage } from '../../src/consumer/identity-stage-applier.js';
import type { QueueRecord } from '../../src/queue/event-queue.js';
import { assertViewMatches, ReferenceView } from '../helpers/reference-view.js';
import { freshDatabase, pgOnly, queryDatabase } from '../helpers/postgres.js';
import { failingStore, INJECTED, modelEvent, queuedEventFields } from '../helpers/model-queued-events.js';

const ENV = 'production' as const;
const HOUR = 3_600_000;
const T0 = Date.UTC(2025, 4, 6, 19, 40);
/** ds-a and ds-q share queue partition 2; ds-b is in partition 15 (checked below). */
const DATA_SET_CHOICES = [['ds-a'], ['ds-a', 'ds-q'], ['ds-a', 'ds-b']] as const;
const WINDOWS: Record<string, number> = { 'ds-a': 7 * 24 * HOUR, 'ds-b': HOUR, 'ds-q': HOUR };
const windowMs = (dataSetId: string) => WINDOWS[dataSetId] ?? 7 * 24 * HOUR;

const queuedEvent = fc.record({
  /** Index into the run's data sets. */
  dataSet: fc.nat(1),
  ...queuedEventFields,
});

type QueuedEvent = typeof queuedEvent extends fc.Arbitrary<infer T> ? T : never;

/** Appends the items, one request each (its own arrival time), in order; returns the queue as the lanes read it. */
async function fillQueue(pool: Pool, items: readonly QueuedEvent[], dataSets: readonly string[]): Promise<QueueRecord[]> {
  const queue = new PostgresEventQueue(pool);
  let at = T0;
  try {
    const appends = items.map((it, i) => {
      at += it.advance * 60_000;
      const dataSetId = dataSets[it.dataSet % dataSets.length]!;
      const { event, meta } = modelEvent(it, i, dataSetId);
      // Started in order: the queue commits pending appends in the order they came (group commit).
      return queue.append({ requestId: `r${i}`, keyId: 'key_test', dataSetId, receivedAt: at, policyVersion: 1, mergeWindowMs: windowMs(dataSetId), events: [event], metas: [meta] });
    });
    await Promise.all(appends);
  } finally {
    await queue.close();
  }
  const records = await readSegments(pool, { fromSeq: 1, limit: items.length + 1 });
  assert.deepEqual(records.map((r) => [r.seq, r.request_id]), items.map((_, i) => [i + 1, `r${i}`]), 'the queue holds the items in order, seq 1..n');
  return records;
}

/** A store whose batches roll back before their commit when `failNext()` says so; its lane stores (laneConsumer asks for them) as well. */
function failingLaneStore(store: PostgresViewStore, failNext: () => boolean): PostgresViewStore {
  return failingStore(store, failNext, (prop, target) =>
    prop === 'forPart' ? (part: Parameters<PostgresViewStore['forPart']>[0]) => failingLaneStore(target.forPart(part), failNext) : undefined,
  );
}

interface Lane {
  readonly lane: ViewLane;
  readonly consumer: ViewConsumer;
}

/**
 * Steps the lanes in the order `schedule` says (each batch failing as `failures` says: injected
 * failures roll back, the lane reads the batch again), until none moves or `turns` are over.
 */
async function stepLanes(lanes: readonly Lane[], schedule: readonly number[], failures: readonly boolean[], turns = Infinity): Promise<void> {
  const done = new Set<number>();
  let f = 0;
  const failNext = () => f < failures.length && failures[f++] === true;
  failing.next = failNext;
  try {
    for (let turn = 0; done.size < lanes.length && turn < turns; turn++) {
      assert.ok(turn < 20_000, 'the lanes did not finish');
      const pending = lanes.map((_, i) => i).filter((i) => !done.has(i));
      const i = pending[(schedule.length > 0 ? schedule[turn % schedule.length]! + turn : turn) % pending.length]!;
      try {
        const result = await lanes[i]!.consumer.step();
        if (!result.moved) done.add(i);
      } catch (error) {
        if (!(error instanceof Error && error.message === INJECTED)) throw error;
        rolledBack++;
      }
    }
  } finally {
    failing.next = () => false;
  }
}

/** Batches rolled back before their commit, over all runs. */
let rolledBack = 0;

/** What the lanes' stores consult before each commit (set by stepLanes). */
const failing = { next: (): boolean => false };

/** The reference of `records` read through `store`: every record (resolved identity), every identity, every counter. */
async function assertMatchesReference(pool: Pool, store: PostgresViewStore, dataSets: readonly string[], records: readonly QueueRecord[], what: string): Promise<void> {
  const reference = new ReferenceView(windowMs);
  for (const r of records) reference.apply(r);
  await assertViewMatches(store, reference, dataSets, what, async (dataSetId, identities) => {
    // No identity beyond the reference's (one created by a batch that should not have been applied).
    const nodes = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM identity_nodes WHERE data_set_id = $1', [dataSetId]);
    assert.equal(nodes.rows[0]!.n, identities.size, `${what}: ${dataSetId} identity nodes`);
  });
}

/** The database of this file's runs (created once), its schema dropped and migrated again for each run. */
let database: string | null = null;
async function freshSchema(): Promise<string> {
  if (database === null) database = await freshDatabase('sharded_model');
  else await queryDatabase(database, `DROP SCHEMA IF EXISTS ${schemaOf(ENV)} CASCADE`);
  await migrate(database, ENV);
  return database;
}

test('PostgreSQL sharded layout: lanes held at one queue position = the reference up to it; released and drained = the reference of the whole queue (S = 1, 2, 4; random batches, interleavings, rolled-back batches)', { ...pgOnly, timeout: 600_000 }, async (t) => {
  assert.equal(queuePartitionOf('ds-a'), queuePartitionOf('ds-q'), 'ds-a and ds-q share a queue partition');
  assert.notEqual(queuePartitionOf('ds-a'), queuePartitionOf('ds-b'), 'ds-b has a queue partition of its own');
  let run = 0;
  /** Holds where the partition's lanes were at different positions, and holds that withheld records: the property must not hold vacuously. */
  let apart = 0;
  let withheld = 0;
  /** Holds of lanes that were apart and that withheld records: a lane behind may have to stop its batch at the fence. */
  let apartWithheld = 0;
  await fc.assert(
    fc.asyncProperty(
      // 'medium': fast-check's default size keeps most arrays under ~10 items, where the lanes are seldom apart.
      fc.array(queuedEvent, { minLength: 1, maxLength: 40, size: 'medium' }),
      fc.constantFrom(...DATA_SET_CHOICES),
      // Batch sizes, by lane (workers with different --batch-size): lanes of one size stop at the same
      // queue positions, so a hold would always find them there. Small batches mostly: the lanes are
      // often apart, and the hold often comes before the end.
      fc.array(fc.oneof({ arbitrary: fc.integer({ min: 1, max: 4 }), weight: 3 }, { arbitrary: fc.integer({ min: 1, max: 30 }), weight: 1 }), { minLength: 1, maxLength: 3 }),
      fc.array(fc.boolean(), { maxLength: 6 }),
      fc.constantFrom(1, 2, 4),
      fc.array(fc.nat(11), { maxLength: 12 }),
      fc.nat(8),
      /** Then one lane goes ahead of the others by this many steps (which one: the next value). */
      fc.nat(2),
      fc.nat(),
      /** Which of the data sets' partitions are held (the first always, the second maybe). */
      fc.boolean(),
      /**
       * The lanes of a partition share one read of it (a worker's lanes: shared-partition-reads.ts)
       * with a window of this many records, small so that it drops, starts again and sends lanes
       * behind it to the database often; null: each lane reads on its own.
       */
      fc.option(fc.integer({ min: 1, max: 8 })),
      async (items, dataSets, batchSizes, failures, shards, schedule, turnsBefore, lead, leader, holdSecond, window) => {
        run++;
        const url = await freshSchema();
        const pool = createPool(url, ENV, { max: 6 });
        try {
          const layout = await fixPostgresViewLayout(pool, { kind: 'sharded', shards });
          assert.deepEqual(layout, { kind: 'sharded', shards });
          const records = await fillQueue(pool, items, dataSets);
          const view = new PostgresViewStore(pool);
          const parts = [...new Set(dataSets.map(queuePartitionOf))];
          const laneStore = failingLaneStore(view, () => failing.next());
          const lanesOf = (part: number): Lane[] => {
            const reads = window === null ? undefined : sharedPartitionReads(pool, part, shards, { mergeWindowMs: windowMs, maxRecords: window, waitMs: 0 });
            return partitionLanes(layout, part).map((lane, k) => ({
              lane,
              consumer: laneConsumer(pool, laneStore, lane, { batchSize: batchSizes[k % batchSizes.length]!, mergeWindowMs: windowMs }, reads),
            }));
          };
          const byPart = new Map(parts.map((part) => [part, lanesOf(part)]));
          const lanes = [...byPart.values()].flat();
          assert.equal(lanes.length, parts.length * (shards + 1));
          const endOf = (part: number) => Math.max(0, ...records.filter((r) => queuePartitionOf(r.data_set_id) === part).map((r) => r.seq)) + 1;
          const offsetsOf = async (ls: readonly Lane[]) => Promise.all(ls.map(async (l) => view.offset(l.lane.consumer)));

          // The lanes go their own ways for a while (rolled-back batches included).
          await stepLanes(lanes, schedule, failures, turnsBefore);
          for (let i = 0; i < lead; i++) await lanes[leader % lanes.length]!.consumer.step();

          // (a) Held: each chosen partition's lanes at one position, as the lifecycle holds them.
          const held = holdSecond ? parts : parts.slice(0, 1);
          const upTo = new Map<number, number>();
          for (const part of held) {
            const partLanes = byPart.get(part)!;
            const fenced = partLanes.map((l) => new PostgresFencedPart(pool, l.lane.consumer));
            const before = await offsetsOf(partLanes);
            if (new Set(before).size > 1) apart++;
            // Where they will be held: the lane furthest ahead (none moves before the freeze).
            const target = Math.max(...before);
            let rounds = 0;
            const at = await holdPartsTogether(fenced, 7, async () => {
              const now = await offsetsOf(partLanes);
              assert.ok(now.every((o) => o <= target), `a lane of partition ${part} passed the fence at ${target - 1}: ${now}`);
              assert.ok(rounds++ < 200, `the lanes of partition ${part} did not come together at ${target}: ${now}`);
              await stepLanes(lanes, schedule, [], lanes.length);
            });
            assert.equal(at + 1, target, 'held where the lane furthest ahead was');
            if (at + 1 < endOf(part)) withheld++;
            if (at + 1 < endOf(part) && new Set(before).size > 1) apartWithheld++;
            upTo.set(part, at);
          }
          // Stepping on (failures again): the held lanes stay where they are, the others drain.
          await stepLanes(lanes, schedule, failures);
          for (const part of parts) {
            const expected = upTo.has(part) ? upTo.get(part)! + 1 : endOf(part);
            assert.deepEqual(await offsetsOf(byPart.get(part)!), byPart.get(part)!.map(() => expected), `partition ${part}'s lanes after stepping on`);
          }
          const heldPrefix = records.filter((r) => {
            const bound = upTo.get(queuePartitionOf(r.data_set_id));
            return bound === undefined || r.seq <= bound;
          });
          await assertMatchesReference(pool, view, dataSets, heldPrefix, 'held');
          // Holding again (a worker that died while holding) finds the same position.
          for (const part of held) {
            const fenced = byPart.get(part)!.map((l) => new PostgresFencedPart(pool, l.lane.consumer));
            assert.equal(await holdPartsTogether(fenced, 7, async () => assert.fail('the lanes are already together')), upTo.get(part));
          }

          // (b) Released and drained: the reference of the whole queue.
          for (const part of held) await releaseParts(byPart.get(part)!.map((l) => new PostgresFencedPart(pool, l.lane.consumer)));
          await stepLanes(lanes, schedule, failures);
          for (const part of parts) {
            assert.deepEqual(await offsetsOf(byPart.get(part)!), byPart.get(part)!.map(() => endOf(part)), `partition ${part}'s lanes at its end`);
          }
          assert.deepEqual(
            (await pool.query('SELECT consumer FROM consumer_offsets WHERE fence_seq IS NOT NULL OR fence_holder IS NOT NULL')).rows,
            [],
            'no fence left',
          );
          await assertMatchesReference(pool, view, dataSets, records, 'drained');
        } finally {
          await pool.end();
        }
      },
    ),
    {
      numRuns: Number(process.env.MODEL_RUNS ?? 80),
      // No time limit: a run cut short would pass with fewer runs. A failure's shrinking can take
      // long (each run a fresh schema); the test's timeout then fails it all the same.
    },
  );
  t.diagnostic(`${run} runs: ${apart} holds of lanes that were apart, ${withheld} holds that withheld records (${apartWithheld} of lanes that were apart), ${rolledBack} batches rolled back`);
  assert.ok(rolledBack > run / 2, `${rolledBack} batches rolled back in ${run} runs`);
  assert.ok(apart > run / 10, `${apart} holds of lanes that were apart in ${run} runs`);
  assert.ok(apartWithheld > run / 10, `${apartWithheld} holds of lanes that were apart withheld records in ${run} runs`);
});

test('PostgreSQL sharded layout: a fence set while a lane reads its batch stops that batch at it (read again under the offset row lock)', pgOnly, async () => {
  const url = await freshSchema();
  const pool = createPool(url, ENV, { max: 4 });
  try {
    const layout = await fixPostgresViewLayout(pool, { kind: 'sharded', shards: 2 });
    const items = Array.from({ length: 10 }, (_, i): QueuedEvent => ({
      dataSet: 0, id: `e${i}`, advance: 1, eventType: 'purchase', source: undefined, value: undefined, currency: 'USD', userData: undefined, consentMmt: false, segments: undefined,
    }));
    await fillQueue(pool, items, ['ds-a']);
    const lane = partitionLanes(layout, queuePartitionOf('ds-a')).find((l) => l.role === 'identities')!;
    const view = new PostgresViewStore(pool);
    const fence = new PostgresFencedPart(pool, lane.consumer);
    let onRead: () => Promise<void> = async () => {};
    const source: QueueSource = {
      read: (from, limit) => readSegments(pool, { fromSeq: from, limit, part: lane.part }),
      async readBatch(from, limit) {
        const records = await readSegments(pool, { fromSeq: from, limit, part: lane.part });
        await onRead(); // the lifecycle sets the fence after the lane's first look at it
        return { records, nextSeq: records.length > 0 ? records[records.length - 1]!.seq + 1 : from };
      },
      close: async () => {},
    };
    const consumer = new ViewConsumer(view.forPart({ consumer: lane.consumer, shard: lane.shard }), source, {
      batchSize: 4, mergeWindowMs: windowMs, consumer: lane.consumer, applier: applyIdentityStage,
    });
    const applied = async () => (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM view_record_identities')).rows[0]!.n;
    assert.equal((await consumer.step()).nextSeq, 5);
    onRead = () => fence.holdAt(6, 1);
    const cut = await consumer.step();
    assert.deepEqual([cut.records, cut.nextSeq, await view.offset(lane.consumer), await applied()], [2, 7, 7, 6], 'the batch stopped at the fence');
    onRead = async () => {};
    const held = await consumer.step();
    assert.deepEqual([held.moved, held.held, await view.offset(lane.consumer)], [false, true, 7], 'held at the fence');
    await fence.releaseFence();
    onRead = async () => void (await fence.freeze(1));
    const frozen = await consumer.step();
    assert.deepEqual([frozen.moved, await view.offset(lane.consumer), await applied()], [false, 7, 6], 'frozen while reading: nothing committed');
    await fence.releaseFence();
    onRead = async () => {};
    await consumer.drain();
    assert.deepEqual([await view.offset(lane.consumer), await applied()], [11, 10]);
  } finally {
    await pool.end();
  }
});
