/**
 * The sharded layout's read side (merged-view/sharded-view-store.ts): an export merges the shards'
 * records in order of first arrival, a page per shard at a time, across many pages of every shard.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { recordShardOf } from '../../src/merged-view/record-shard.js';
import { ShardedViewStore } from '../../src/merged-view/sharded-view-store.js';
import { SqliteViewStore } from '../../src/merged-view/sqlite-view-store.js';
import type { MergedRecord } from '../../src/merged-view/view-store.js';
import { tempDataDir } from '../helpers/server-process.js';

const T0 = Date.UTC(2026, 10, 26);

const record = (seq: number): MergedRecord => ({
  dataSetId: 'ds', recordKey: `id:e${seq}`, eventId: `e${seq}`, firstSeq: seq, lastSeq: seq, firstReceivedAt: T0 + seq, lastReceivedAt: T0 + seq,
  mergedCount: 1, identityKey: null, measurementOnly: false, event: { id: `e${seq}` },
});

test('an export of a sharded view: every record once, in order of first arrival, in pages of 1,000, over shards of several pages each', async () => {
  const dir = tempDataDir('ecapi-sharded-export-');
  const P = 3;
  const shards = Array.from({ length: P }, (_, k) => new SqliteViewStore(join(dir, `view-s${k}.db`)));
  const identities = [new SqliteViewStore(join(dir, 'view.db'))];
  // Pages each shard has handed out so far: what the export holds in memory at most.
  const given = Array.from({ length: P }, () => 0);
  const counted = shards.map((shard, k) => new Proxy(shard, {
    get(target, prop, receiver) {
      if (prop === 'exportRecords') {
        return (dataSetId: string, sinceMs: number, onPage: (records: MergedRecord[]) => void | Promise<void>) =>
          target.exportRecords(dataSetId, sinceMs, (page) => (given[k]!++, onPage(page)));
      }
      const value = Reflect.get(target, prop, receiver) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  }));
  const view = new ShardedViewStore(counted, identities);
  try {
    const N = 7_500;
    const byShard = Array.from({ length: P }, () => [] as MergedRecord[]);
    for (let seq = 1; seq <= N; seq++) byShard[recordShardOf('ds', `id:e${seq}`, P)]!.push(record(seq));
    assert.ok(byShard.every((records) => records.length > 2000), 'every shard exports several pages');
    for (let k = 0; k < P; k++) await shards[k]!.transaction(async (tx) => tx.writeRecords(byShard[k]!));

    const pages: number[] = [];
    const seqs: number[] = [];
    const givenAtFirstPage: number[] = [];
    await view.exportRecords('ds', 0, async (page) => {
      if (pages.length === 0) givenAtFirstPage.push(...given);
      pages.push(page.length);
      for (const r of page) seqs.push(r.firstSeq);
      await new Promise((r) => setImmediate(r)); // a slow reader: the shards wait
    });
    assert.deepEqual(seqs, Array.from({ length: N }, (_, i) => i + 1));
    assert.deepEqual(pages, [1000, 1000, 1000, 1000, 1000, 1000, 1000, 500]);
    // Streamed: when the reader gets its first page, each shard has handed out one page of its three.
    assert.deepEqual(givenAtFirstPage, [1, 1, 1]);

    // Since a time: only the records last updated from then on, still in order.
    const since: number[] = [];
    await view.exportRecords('ds', T0 + 7_000, (page) => void since.push(...page.map((r) => r.firstSeq)));
    assert.deepEqual(since, Array.from({ length: 501 }, (_, i) => 7_000 + i));

    // A reader that fails stops every shard's export, and the error reaches the caller.
    await assert.rejects(view.exportRecords('ds', 0, () => { throw new Error('reader failed'); }), /reader failed/);
  } finally {
    await view.close();
  }
});
