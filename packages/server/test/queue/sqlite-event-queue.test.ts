import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { bodyLogDir, bodyLogFile } from '../../src/queue/sqlite-body-log.js';
import { SqliteEventQueue } from '../../src/queue/sqlite-event-queue.js';
import { tempDataDir } from '../helpers/server-process.js';
import { createLegacyQueueFile } from '../helpers/legacy-queue-file.js';
import { eventQueueContract } from './event-queue-contract.js';

eventQueueContract('SqliteEventQueue', {
  async create(observer) {
    const file = join(tempDataDir('ecapi-queue-'), 'queue.db');
    return { queue: new SqliteEventQueue(file, observer), reopen: async () => new SqliteEventQueue(file) };
  },
});

const bigEvent = (id: string, pad: number) => ({ data_set_id: 'ds', id, timestamp: 1_700_000_000, event_type: 'purchase', ext: { pad: 'p'.repeat(pad) } });
const appendOf = (events: Record<string, unknown>[], rawBody: Buffer, requestId: string) => ({
  requestId, keyId: 'key_test', dataSetId: 'ds', receivedAt: 1_700_000_000_000, policyVersion: 1, mergeWindowMs: 604_800_000,
  events, metas: events.map(() => undefined), rawBody,
});

test('a large raw body is stored once, in the body log, and the row only points at it', async () => {
  const file = join(tempDataDir('ecapi-queue-'), 'queue.db');
  const queue = new SqliteEventQueue(file);
  const events = [bigEvent('log-1', 40_000), bigEvent('log-2', 10)];
  const body = Buffer.from(JSON.stringify({ events }));
  const sent = Buffer.from(body); // the queue takes `body` over (transfers it to its writer thread)
  const small = [bigEvent('inline-1', 10)];
  try {
    const a = await queue.append(appendOf(events, body, 'r1'));
    const b = await queue.append(appendOf(small, Buffer.from(JSON.stringify(small[0])), 'r2'));
    assert.deepEqual((await queue.read({ fromSeq: a.firstSeq, limit: 10 })).map((r) => r.event), [...events, ...small]);
    assert.equal(b.firstSeq, a.firstSeq + 2);
  } finally {
    await queue.close();
  }
  const db = new Database(file, { readonly: true });
  try {
    const rows = db.prepare('SELECT first_seq, length(events) AS inline, body_file, body_offset, body_length FROM queue_segments ORDER BY first_seq').all() as {
      inline: number; body_file: number | null; body_offset: number | null; body_length: number | null;
    }[];
    assert.equal(rows[0]!.inline, 0);
    assert.equal(rows[0]!.body_file, 1);
    assert.equal(rows[0]!.body_length, sent.length);
    assert.ok(rows[1]!.inline > 0, 'a small body stays inline');
    assert.equal(rows[1]!.body_file, null);
    const logged = readFileSync(bodyLogFile(bodyLogDir(file), 1));
    assert.deepEqual(logged.subarray(rows[0]!.body_offset!, rows[0]!.body_offset! + rows[0]!.body_length!), sent);
    assert.deepEqual(db.prepare('SELECT file_no, end_offset FROM queue_log_head').get(), { file_no: 1, end_offset: sent.length });
  } finally {
    db.close();
  }
});

test('two writers on one queue file (as two processes) never share body-log bytes', async () => {
  const file = join(tempDataDir('ecapi-queue-'), 'queue.db');
  const one = new SqliteEventQueue(file);
  const two = new SqliteEventQueue(file);
  try {
    const sent = new Map<string, Record<string, unknown>>();
    const appends = Array.from({ length: 40 }, (_, i) => {
      const event = bigEvent(`w-${i}`, 33_000 + i * 101);
      sent.set(event.id, event);
      return (i % 2 === 0 ? one : two).append(appendOf([event], Buffer.from(JSON.stringify(event)), `r${i}`));
    });
    await Promise.all(appends);
    const records = await one.read({ fromSeq: 1, limit: 100 });
    assert.equal(records.length, 40);
    for (const record of records) assert.deepEqual(record.event, sent.get(record.event.id as string));
  } finally {
    await one.close();
    await two.close();
  }
});

test('a queue file from before the body log opens, keeps its rows, and takes logged bodies', async () => {
  const file = join(tempDataDir('ecapi-queue-'), 'queue.db');
  const old = createLegacyQueueFile(file);
  const legacy = bigEvent('legacy-1', 5);
  old.prepare('INSERT INTO queue_segments VALUES (1, 1, 1700000000000, ?, ?, ?, 1, ?, NULL)').run('ds', 'key_test', 'r0', JSON.stringify([legacy]));
  old.close();
  const queue = new SqliteEventQueue(file);
  try {
    const big = bigEvent('after-1', 50_000);
    const receipt = await queue.append(appendOf([big], Buffer.from(JSON.stringify(big)), 'r1'));
    assert.equal(receipt.firstSeq, 2);
    assert.deepEqual((await queue.read({ fromSeq: 1, limit: 10 })).map((r) => r.event), [legacy, big]);
  } finally {
    await queue.close();
  }
});
