/**
 * The PostgreSQL consumer's suppression list (lifecycle/postgres-lifecycle-store.ts
 * PostgresSuppressionList) against a real database: concurrent refreshes of a worker's busy lanes
 * share reads (at most two in a row, not one each on its one connection), and a refresh called
 * after a suppression was committed always sees it, even while an earlier read is still running
 * (a read started before the call is never handed to it).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Pool } from 'pg';
import { PostgresSuppressionList } from '../../src/lifecycle/postgres-lifecycle-store.js';
import { createPool } from '../../src/postgres/database.js';
import { sha } from '../helpers/event-generator.js';
import { openModelLanes, resetModelDatabase } from '../helpers/postgres-model-lanes.js';
import { pgOnly } from '../helpers/postgres.js';

/** The worker's one-connection pool, its reads of lifecycle_meta counted; `hold` keeps the next one's answer until the gate opens. */
function countingPool(url: string) {
  const pool = createPool(url, 'production', { max: 1 });
  let gate: Promise<void> | null = null;
  const counted = {
    metaReads: 0,
    hold(): () => void {
      let open!: () => void;
      gate = new Promise((resolve) => (open = resolve));
      return open;
    },
    pool: {
      query: async (text: string, values?: unknown[]) => {
        if (!text.includes('FROM lifecycle_meta')) return pool.query(text, values);
        counted.metaReads++;
        const waiting = gate;
        gate = null;
        // Read now, answered when the gate opens: the read is older than what happens meanwhile.
        const result = await pool.query(text, values);
        if (waiting) await waiting;
        return result;
      },
    } as unknown as Pool,
    end: () => pool.end(),
  };
  return counted;
}

test('PostgreSQL suppression list: concurrent refreshes share reads; a refresh made after a suppression sees it', { ...pgOnly, timeout: 60_000 }, async () => {
  const url = await resetModelDatabase(null, 'suppression_list_reads', 'production');
  const pg = await openModelLanes(url, 'production', ['shop'], () => ({ batchSize: 100, mergeWindowMs: () => 86_400_000 }));
  const counting = countingPool(url);
  const list = new PostgresSuppressionList(counting.pool);
  const email = `email:${sha('suppress-me@example.com')}`;
  try {
    await list.refresh();
    assert.equal(counting.metaReads, 1);
    // Sixteen lanes at once: one read runs, the others share the next.
    counting.metaReads = 0;
    await Promise.all(Array.from({ length: 16 }, () => list.refresh()));
    assert.ok(counting.metaReads <= 2, `${counting.metaReads} reads for 16 concurrent refreshes`);

    // A read under way, then a suppression committed, then a refresh: it must not be given the old read.
    const open = counting.hold();
    const early = list.refresh();
    await new Promise((r) => setTimeout(r, 50));
    const request = await pg.lifecycle.store.request({ dataSetId: 'shop', kind: 'forget_identifier', target: email, suppress: true, boundSeq: 0, actor: 'test' });
    await pg.lifecycle.store.suppress('shop', [await pg.lifecycle.store.digest('shop', email)], request.id);
    const late = list.refresh();
    open();
    await early;
    await late;
    assert.equal(list.suppressed('shop', [email]), true, 'the refresh made after the suppression sees it');
    assert.equal(list.suppressed('other', [email]), false);
  } finally {
    await counting.end();
    await pg.close();
  }
});
