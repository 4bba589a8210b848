/**
 * Erasure of queued events in the PostgreSQL queue, with the rules of the embedded one
 * (sqlite-queue-eraser.ts): an erased event becomes null in its segment's JSON array (a raw body
 * is rewritten as an array, `raw = false`), sequence numbers stay, readers skip it. Pages are read
 * through the (part, first_seq) index of the data set's queue partition and decoded without a
 * lock; each UPDATE is a row lock on one segment, which ingestion (inserts only) never waits for.
 * The erased events' entries in the segment's `metas` become null by the same UPDATE
 * (lifecycle-backend.ts eraseMetasOf: a redacted path can name a property key that is an email).
 *
 * The old row version is a dead tuple until (auto)vacuum; `clearOldCopies` runs VACUUM on queue_segments
 * after a request (issue 29); its bytes are overwritten when the page space is reused. There is no
 * body log on this profile. Each UPDATE adds its count to the request's tally in the same
 * transaction (postgres-lifecycle-store.ts), exact across takeovers.
 */
import { segmentEventsOfText } from '../queue/segment-records.js';
import { inTransaction, type Pool } from '../postgres/database.js';
import { queuePartitionOf } from '../postgres/partitions.js';
import { eraseMatchingEvents, eraseMetasOf, type QueueEraser } from './lifecycle-backend.js';
import { addPgTally, readPgTally } from './postgres-lifecycle-store.js';
import { vacuum } from './postgres-view-eraser.js';

export class PostgresQueueEraser implements QueueEraser {
  readonly #pool: Pool;

  constructor(pool: Pool) {
    this.#pool = pool;
  }

  async erase(
    requestId: number,
    dataSetId: string,
    upToSeq: number,
    afterSeq: number,
    limit: number,
    match: (event: Record<string, unknown>, seq: number) => boolean,
  ): Promise<{ next: number | null }> {
    const { rows } = await this.#pool.query<{ first_seq: string; raw: boolean; events: string; metas: string | null }>(
      `SELECT first_seq, raw, events, metas FROM queue_segments WHERE part = $1 AND data_set_id = $2 AND first_seq > $3 AND first_seq <= $4
       ORDER BY first_seq LIMIT $5`,
      [queuePartitionOf(dataSetId), dataSetId, afterSeq, upToSeq, limit],
    );
    let erased = 0;
    const seqs: string[] = [];
    const texts: (string | null)[] = [];
    const metaTexts: (string | null)[] = [];
    for (const row of rows) {
      const events = segmentEventsOfText(row.events, row.raw) as (Record<string, unknown> | null)[];
      const first = Number(row.first_seq);
      const changed = eraseMatchingEvents(events, first, match);
      const metas = eraseMetasOf(row.metas, events);
      // Nothing erased now, but metas of events erased before they went with them (an older version): cleaned.
      if (changed === 0 && metas === undefined) continue;
      erased += changed;
      seqs.push(row.first_seq);
      texts.push(changed === 0 ? null : JSON.stringify(events)); // null: events as they are
      metaTexts.push(metas === undefined ? row.metas : metas);
    }
    if (seqs.length > 0) {
      await inTransaction(this.#pool, async (db) => {
        await db.query(
          `UPDATE queue_segments q SET events = coalesce(u.events, q.events), raw = q.raw AND u.events IS NULL, metas = u.metas
           FROM unnest($1::bigint[], $2::text[], $3::text[]) AS u(first_seq, events, metas)
           WHERE q.first_seq = u.first_seq`,
          [seqs, texts, metaTexts],
        );
        await addPgTally(db, requestId, { queue_events: erased });
      });
    }
    return { next: rows.length < limit ? null : Number(rows[rows.length - 1]!.first_seq) };
  }

  async tally(requestId: number): Promise<number> {
    return (await readPgTally(this.#pool, requestId)).queue_events;
  }

  async clearTally(): Promise<void> {}

  async overwritePending(): Promise<number> {
    return 0;
  }

  async clearOldCopies(): Promise<boolean> {
    await vacuum(this.#pool, ['queue_segments']);
    return true;
  }
}
