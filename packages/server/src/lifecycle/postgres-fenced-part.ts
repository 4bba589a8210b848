/**
 * One lane of a sharded PostgreSQL view as the lifecycle's hold sees it (parts-fence.ts): its offset
 * row in `consumer_offsets`, whose `fence_seq` and `fence_holder` are the lane's fence
 * (merged-view/view-fence.ts; the embedded one is a row in the part's file).
 *
 * Invariants, as on SQLite:
 * - A lane's batch locks its offset row (SELECT ... FOR UPDATE) and reads the fence there
 *   (merged-view/postgres-view-store.ts), and `freeze` and `holdAt` update the row under the same
 *   lock: a batch that read "no fence" has committed (and moved the offset) before a fence is set,
 *   and one that starts after it sees it. No batch commits past a fence.
 * - The fence is in the database: it outlasts the worker that set it (a request's next attempt holds
 *   again at the same position; lifecycle/postgres-view-eraser.ts releases stale ones).
 * - A fence never moves a lane back: `holdAt` below the offset is refused.
 */
import { inTransaction, type Pool } from '../postgres/database.js';
import type { FencedPart } from './parts-fence.js';

export class PostgresFencedPart implements FencedPart {
  readonly #pool: Pool;
  readonly #consumer: string;

  /** `consumer`: the lane's offset row (merged-view/postgres-view-layout.ts creates it with the layout). */
  constructor(pool: Pool, consumer: string) {
    this.#pool = pool;
    this.#consumer = consumer;
  }

  async offset(): Promise<number> {
    const { rows } = await this.#pool.query<{ next_seq: string }>('SELECT next_seq FROM consumer_offsets WHERE consumer = $1', [this.#consumer]);
    return rows[0] ? Number(rows[0].next_seq) : 1;
  }

  async freeze(holder: number): Promise<number> {
    return inTransaction(this.#pool, async (db) => {
      await db.query('INSERT INTO consumer_offsets (consumer, next_seq) VALUES ($1, 1) ON CONFLICT (consumer) DO NOTHING', [this.#consumer]);
      // The row lock waits for a batch being committed, as the embedded file's write lock does.
      const { rows } = await db.query<{ next_seq: string }>('SELECT next_seq FROM consumer_offsets WHERE consumer = $1 FOR UPDATE', [this.#consumer]);
      const offset = Number(rows[0]!.next_seq);
      await db.query('UPDATE consumer_offsets SET fence_seq = $2, fence_holder = $3 WHERE consumer = $1', [this.#consumer, offset - 1, holder]);
      return offset;
    });
  }

  async holdAt(upToSeq: number, holder: number): Promise<void> {
    await inTransaction(this.#pool, async (db) => {
      const { rows } = await db.query<{ next_seq: string }>('SELECT next_seq FROM consumer_offsets WHERE consumer = $1 FOR UPDATE', [this.#consumer]);
      const offset = Number(rows[0]!.next_seq);
      if (offset > upToSeq + 1) throw new Error(`view fence below the consumer's offset (${offset} > ${upToSeq + 1})`);
      await db.query('UPDATE consumer_offsets SET fence_seq = $2, fence_holder = $3 WHERE consumer = $1', [this.#consumer, upToSeq, holder]);
    });
  }

  async releaseFence(): Promise<void> {
    await this.#pool.query('UPDATE consumer_offsets SET fence_seq = NULL, fence_holder = NULL WHERE consumer = $1', [this.#consumer]);
  }

  async fence(): Promise<{ upToSeq: number; holder: number } | null> {
    const { rows } = await this.#pool.query<{ fence_seq: string | null; fence_holder: string | null }>(
      'SELECT fence_seq, fence_holder FROM consumer_offsets WHERE consumer = $1',
      [this.#consumer],
    );
    const row = rows[0];
    return row && row.fence_seq !== null ? { upToSeq: Number(row.fence_seq), holder: Number(row.fence_holder) } : null;
  }
}
