/**
 * Holding every part of a sharded view at one queue position (consumer/identity-stage-applier.ts,
 * "Lifecycle"): what a deletion needs before it touches records in their shards and identities in
 * their identity part, so that it sees and leaves exactly the view one applier would have at that
 * position, whatever queue offsets the parts' consumers had reached.
 *
 * Protocol (each step one write transaction of a part's file, merged-view/view-fence.ts):
 * 1. freeze every part where it is (fence = its offset - 1): from then on no part moves forward
 *    past its fence, and none is in the middle of committing a batch that would;
 * 2. F = the highest offset - 1: every part is at or below F + 1, and the part furthest ahead is there;
 * 3. raise every fence to F: the parts behind apply up to F (their consumers go on stepping) and stop;
 * 4. wait until every part's offset is F + 1: the view now is one applier's at F + 1.
 * Then the caller deletes, and releases the fence. The parts' fences are in their files, so a
 * worker killed while holding them leaves the parts held; the next attempt (hold again: every part
 * is at F + 1, so step 2 finds the same F) carries the deletion out and releases them.
 *
 * Hazard: a part whose consumer does not run never reaches F + 1; `wait` is the caller's (it
 * renews its claim, notices a stop) and is called until the parts converge.
 */

type MaybeAsync<T> = T | Promise<T>;

/**
 * One part as the fence sees it: an embedded file (lifecycle/sqlite-view-eraser.ts), or a lane's
 * offset row on PostgreSQL (lifecycle/postgres-fenced-part.ts).
 */
export interface FencedPart {
  /** The next queue position the part's consumer applies. */
  offset(): MaybeAsync<number>;
  /** Fence just below the offset for `holder`, in one write transaction; returns the offset. */
  freeze(holder: number): MaybeAsync<number>;
  /** Fence at `upToSeq` for `holder` (not below the offset). */
  holdAt(upToSeq: number, holder: number): MaybeAsync<void>;
  releaseFence(): MaybeAsync<void>;
  /** The fence and who set it, or null. */
  fence(): MaybeAsync<{ upToSeq: number; holder: number } | null>;
}

/**
 * The parts are held by another deletion request (one whose attempt failed part-way and will be
 * retried): this hold waits for that request rather than take its parts, whose files may be
 * between the two transactions of a record (sharded-view-eraser.ts).
 */
export class PartsHeldError extends Error {
  override readonly name = 'PartsHeldError';
  constructor(readonly holder: number) {
    super(`the view's parts are held by deletion request ${holder}`);
  }
}

/**
 * Holds `parts` at one queue position for `holder` (a deletion request's id, 0: a retention round);
 * returns it (F: every part has applied exactly up to F).
 */
export async function holdPartsTogether(parts: readonly FencedPart[], holder: number, wait: () => Promise<void>): Promise<number> {
  for (const part of parts) {
    const other = (await part.fence())?.holder;
    if (other !== undefined && other !== 0 && other !== holder) throw new PartsHeldError(other);
  }
  const offsets: number[] = [];
  for (const part of parts) offsets.push(await part.freeze(holder));
  const upTo = Math.max(...offsets) - 1;
  for (const part of parts) await part.holdAt(upTo, holder);
  while (!(await allAt(parts, upTo + 1))) await wait();
  return upTo;
}

async function allAt(parts: readonly FencedPart[], nextSeq: number): Promise<boolean> {
  for (const part of parts) if ((await part.offset()) !== nextSeq) return false;
  return true;
}

/** The parts' consumers go on. */
export async function releaseParts(parts: readonly FencedPart[]): Promise<void> {
  for (const part of parts) await part.releaseFence();
}
