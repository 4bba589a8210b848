import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { SqliteEventQueue } from '../../src/queue/sqlite-event-queue.js';
import { SqliteQueueRetention } from '../../src/queue/sqlite-queue-retention.js';
import { bodyLogDir } from '../../src/queue/sqlite-body-log.js';
import { tempDataDir } from '../helpers/server-process.js';

const DAY = 24 * 3600 * 1000;
const NOW = 1_800_000_000_000;

/** A request of `n` events received at `receivedAt`; ~40 KB when `big` (it goes to the body log). */
function request(id: string, n: number, receivedAt: number, big: boolean) {
  const events = Array.from({ length: n }, (_, i) => ({
    data_set_id: 'ds', id: `${id}-${i}`, timestamp: 1_700_000_000, event_type: 'purchase', ...(big ? { ext: { pad: 'p'.repeat(Math.ceil(40_000 / n)) } } : {}),
  }));
  const body = Buffer.from(JSON.stringify({ events }));
  return { requestId: id, keyId: 'key_test', dataSetId: 'ds', receivedAt, policyVersion: 1, mergeWindowMs: 604_800_000, events, metas: events.map(() => undefined), rawBody: body };
}

const logFiles = (file: string) => readdirSync(bodyLogDir(file)).sort();

test('retention deletes consumed old segments, never the newest one, and unlinks body-log files one round after they are unreferenced', async () => {
  const file = join(tempDataDir('ecapi-retention-'), 'queue.db');
  // ~100 KB files: two 40 KB bodies per file.
  const queue = new SqliteEventQueue(file, undefined, { bodyLogFileBytes: 100_000 });
  const retention = new SqliteQueueRetention(file);
  try {
    const seqs: number[] = [];
    for (let i = 0; i < 8; i++) seqs.push((await queue.append(request(`old${i}`, 2, NOW - 10 * DAY, i % 2 === 0 || i < 6))).firstSeq);
    const fresh = await queue.append(request('fresh', 2, NOW - 1000, true));
    assert.deepEqual(seqs, [1, 3, 5, 7, 9, 11, 13, 15]);
    assert.equal(fresh.firstSeq, 17);
    const filesBefore = logFiles(file);
    assert.ok(filesBefore.length >= 4, `several log files: ${filesBefore.join(',')}`);

    // The consumer applied everything before seq 10: old0..old3 (seqs 1-8) are whole; old4 (9-10) is
    // whole too; old5 starts at 11. Retention 7 days: everything "old" qualifies by age.
    let round = retention.run(11, 7 * DAY, NOW);
    assert.equal(round.segmentsDeleted, 5);
    assert.equal(round.filesDeleted, 0, 'files are unlinked one round later');
    const left = await queue.read({ fromSeq: 1, limit: 100 });
    assert.equal(left[0]!.seq, 11, 'reads start at the first kept record');
    assert.equal(left.length, 8);

    round = retention.run(11, 7 * DAY, NOW);
    assert.equal(round.segmentsDeleted, 0);
    assert.ok(round.filesDeleted >= 1, 'the files only deleted segments pointed into are gone');
    // Every kept record still reads back in full.
    assert.deepEqual((await queue.read({ fromSeq: 1, limit: 100 })).map((r) => r.event.id), left.map((r) => r.event.id));

    // A segment not yet applied stays, however old; a fresh one stays however applied.
    round = retention.run(100, 7 * DAY, NOW);
    assert.equal(round.segmentsDeleted, 3, 'old5..old7 go; fresh is too young');
    round = retention.run(100, 0, NOW + 10 * DAY);
    assert.equal(round.segmentsDeleted, 0, 'the newest segment is never deleted');
    retention.run(100, 0, NOW + 10 * DAY);
    assert.deepEqual((await queue.read({ fromSeq: 1, limit: 100 })).map((r) => r.event.id), ['fresh-0', 'fresh-1']);

    // Sequence numbers go on from the newest segment, not from 1.
    const after = await queue.append(request('after', 1, NOW, false));
    assert.equal(after.firstSeq, 19);
    const kept = logFiles(file);
    assert.ok(kept.length < filesBefore.length, `${kept.join(',')} < ${filesBefore.join(',')}`);
  } finally {
    retention.close();
    await queue.close();
  }
});
