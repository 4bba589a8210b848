/**
 * The EventQueue contract, written once and run against every implementation (SQLite now,
 * PostgreSQL in the scale-out profile): durable append with one receipt per request, consecutive
 * sequence numbers per request, ordered reads from any offset, filtering, group commit under
 * concurrency, and close() flushing what was appended.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { EventQueue, QueueAppend, QueueCommitObserver } from '../../src/queue/event-queue.js';

export interface QueueFactory {
  /** A fresh, empty queue (reporting its commits to `observer`). `reopen` opens the same store again after close(). */
  create(observer?: QueueCommitObserver): Promise<{ queue: EventQueue; reopen: () => Promise<EventQueue> }>;
}

function batch(dataSetId: string, ids: string[], requestId = `req-${ids[0]}`): QueueAppend {
  return {
    requestId,
    keyId: 'key_test',
    dataSetId,
    receivedAt: 1_700_000_000_000,
    policyVersion: 3,
    mergeWindowMs: 1_500,
    events: ids.map((id) => ({ data_set_id: dataSetId, id, timestamp: 1_700_000_000, event_type: 'purchase' })),
    metas: ids.map((_, i) => (i === 0 ? { ip: 'truncated' as const } : undefined)),
  };
}

export function eventQueueContract(name: string, factory: QueueFactory): void {
  test(`${name}: appends get consecutive sequence numbers and read back exactly`, async () => {
    const { queue } = await factory.create();
    try {
      const a = await queue.append(batch('ds1', ['a1', 'a2', 'a3']));
      const b = await queue.append(batch('ds2', ['b1']));
      assert.equal(a.count, 3);
      assert.equal(b.firstSeq, a.firstSeq + 3);
      const records = await queue.read({ fromSeq: 0, limit: 100 });
      assert.deepEqual(records.map((r) => [r.seq, r.event.id, r.data_set_id]), [
        [a.firstSeq, 'a1', 'ds1'], [a.firstSeq + 1, 'a2', 'ds1'], [a.firstSeq + 2, 'a3', 'ds1'], [b.firstSeq, 'b1', 'ds2'],
      ]);
      const first = records[0]!;
      assert.equal(first.request_id, 'req-a1');
      assert.equal(first.key_id, 'key_test');
      assert.equal(first.received_at, 1_700_000_000_000);
      assert.equal(first.policy_version, 3);
      assert.equal(first.merge_window_ms, 1_500, 'the merge window the events were accepted under');
      assert.deepEqual(first.meta, { ip: 'truncated' });
      assert.equal(records[1]!.meta, undefined);
    } finally {
      await queue.close();
    }
  });

  test(`${name}: reads start at any offset, including inside a request, and honour limit and data set`, async () => {
    const { queue } = await factory.create();
    try {
      const a = await queue.append(batch('ds1', ['a1', 'a2', 'a3']));
      await queue.append(batch('ds2', ['b1', 'b2']));
      await queue.append(batch('ds1', ['c1']));
      assert.deepEqual((await queue.read({ fromSeq: a.firstSeq + 1, limit: 3 })).map((r) => r.event.id), ['a2', 'a3', 'b1']);
      assert.deepEqual((await queue.read({ fromSeq: a.firstSeq + 2, limit: 100, dataSetId: 'ds1' })).map((r) => r.event.id), ['a3', 'c1']);
      assert.deepEqual(await queue.read({ fromSeq: a.firstSeq + 100, limit: 10 }), []);
    } finally {
      await queue.close();
    }
  });

  test(`${name}: concurrent appends all resolve with disjoint ranges (group commit)`, async () => {
    const { queue } = await factory.create();
    try {
      const receipts = await Promise.all(
        Array.from({ length: 200 }, (_, i) => queue.append(batch('ds', Array.from({ length: 1 + (i % 5) }, (_, j) => `r${i}-${j}`)))),
      );
      const seqs = receipts.flatMap((r) => Array.from({ length: r.count }, (_, i) => r.firstSeq + i));
      assert.equal(new Set(seqs).size, seqs.length, 'no sequence number handed out twice');
      const records = await queue.read({ fromSeq: 0, limit: 10_000 });
      assert.equal(records.length, seqs.length);
      for (const [i, receipt] of receipts.entries()) {
        const record = records.find((r) => r.seq === receipt.firstSeq)!;
        assert.equal(record.event.id, `r${i}-0`);
      }
      assert.equal(queue.health().writable, true);
    } finally {
      await queue.close();
    }
  });

  test(`${name}: a raw request body (bare event or events wrapper) reads back as its events`, async () => {
    const { queue } = await factory.create();
    try {
      const bare = { data_set_id: 'ds', id: 'raw-1', timestamp: 1_700_000_000, event_type: 'purchase', ext: { n: 1 } };
      const wrapped = [
        { data_set_id: 'ds', id: 'raw-2', timestamp: 1_700_000_000, event_type: 'purchase' },
        { data_set_id: 'ds', id: 'raw-3', timestamp: 1_700_000_000, event_type: 'page_view' },
      ];
      // A large body too, so that the zero-copy transfer path is taken.
      const big = { ...bare, id: 'raw-big', ext: { pad: 'x'.repeat(100_000) } };
      const a = await queue.append({ ...batch('ds', ['raw-1']), events: [bare], rawBody: Buffer.from(JSON.stringify(bare)) });
      const b = await queue.append({ ...batch('ds', ['raw-2', 'raw-3']), events: wrapped, rawBody: Buffer.from(`{ "events" : ${JSON.stringify(wrapped)} }`) });
      const c = await queue.append({ ...batch('ds', ['raw-big']), events: [big], rawBody: Buffer.from(JSON.stringify(big)) });
      assert.equal(b.firstSeq, a.firstSeq + 1);
      const records = await queue.read({ fromSeq: a.firstSeq, limit: 10 });
      assert.deepEqual(records.map((r) => r.event), [bare, ...wrapped, big]);
      assert.deepEqual(records.map((r) => r.seq), [a.firstSeq, b.firstSeq, b.firstSeq + 1, c.firstSeq]);
    } finally {
      await queue.close();
    }
  });

  test(`${name}: appended events survive close and reopen`, async () => {
    const { queue, reopen } = await factory.create();
    const pending = [queue.append(batch('ds', ['x1'])), queue.append(batch('ds', ['x2', 'x3']))];
    await queue.close();
    await Promise.all(pending);
    const again = await reopen();
    try {
      assert.deepEqual((await again.read({ fromSeq: 0, limit: 10 })).map((r) => r.event.id), ['x1', 'x2', 'x3']);
      const next = await again.append(batch('ds', ['x4']));
      assert.equal((await again.read({ fromSeq: next.firstSeq, limit: 10 }))[0]!.event.id, 'x4');
    } finally {
      await again.close();
    }
  });

  test(`${name}: one commit never holds more than 20,000 events, however many requests wait`, async () => {
    const commits: number[] = [];
    const { queue } = await factory.create({
      onCommit: ({ events }) => commits.push(events),
      onFailure: () => undefined,
      onHealth: () => undefined,
    });
    try {
      // 31 requests of 1,000 events appended in one turn of the event loop: they all wait at once.
      const ids = (r: number) => Array.from({ length: 1000 }, (_, i) => `r${r}-${i}`);
      const receipts = await Promise.all(Array.from({ length: 31 }, (_, r) => queue.append(batch('ds1', ids(r), `req-cap-${r}`))));
      assert.equal(receipts.reduce((n, r) => n + r.count, 0), 31_000);
      assert.equal(commits.reduce((n, e) => n + e, 0), 31_000, 'every event committed once');
      assert.ok(commits.length >= 2, `31,000 events need at least two commits, got ${JSON.stringify(commits)}`);
      assert.ok(Math.max(...commits) <= 20_000, `commits of ${JSON.stringify(commits)} events`);
      // Sequence numbers stay consecutive across the commits, in order of append.
      receipts.forEach((r, i) => i > 0 && assert.equal(r.firstSeq, receipts[i - 1]!.firstSeq + 1000));
    } finally {
      await queue.close();
    }
  });
}
