/**
 * One read of a queue partition's segments for every lane of it that this worker applies: the
 * sharded layout on PostgreSQL, where a partition is its identity part and S record shards
 * (postgres-partitions.ts, consumer/DESIGN.md "The sharded layout on PostgreSQL").
 *
 * Why: each lane read and decoded all of its partition's segments itself, so the server
 * decompressed and sent them, and the worker turned their bytes into strings and parsed them, S + 1
 * times (bench/README.md, "The sharded layout on PostgreSQL": at S = 1 the driver's decoding and
 * the segments' JSON.parse cost the worker ~1.8 times the data-set layout's per event). Here the
 * lanes of one partition in one worker share a window of its decoded records.
 *
 * The window holds the partition's records with seq in [start, end), all of them: it only ever
 * grows by a read starting at `end`, and records become visible in queue order (appends commit
 * under the queue head's lock; read-ahead-source.ts). A lane's read from `fromSeq`:
 * - inside the window: served from it, after one read at `end` when it wants more than the window
 *   holds (a read that comes back short means the queue has no more now: the lane gets what there
 *   is, as a read of its own would give it);
 * - behind the window (a lane that fell behind, or reads again after a rollback): a read of its own
 *   from the database, the window untouched;
 * - past the window's end, or with no window: the window starts again there.
 * So a lane gets exactly what a read of its own would return, or a prefix of it (a shorter batch).
 *
 * Invariants and hazards:
 * - Lanes share the record objects: nothing mutates a queued event (merge.ts `cloneIfNeeded`;
 *   identity.ts `normalizeEvent` copies what it changes). A change there must copy first.
 * - Erasure: a deletion rewrites a partition's segments only below the lowest offset of its lanes
 *   (the lifecycle waits for it), and a lane is served only from its own offset on; the records
 *   below every live lane's last read are dropped at each read, and the whole window once every
 *   lane has read up to its end, so a caught-up partition holds nothing here.
 * - Memory: at most `maxRecords` records (postgres-partitions.ts: twice a record shard's read,
 *   S × the batch size).
 * - Pace: a lane that would grow the window past its bound while another live lane is behind it
 *   waits (at most `waitMs`, on a monotonic clock) for that lane to read on. The lanes of a worker
 *   share its one thread, so the wait hands the thread to the slow lane instead of decoding the
 *   segments twice, and a partition is applied as far as its slowest lane anyway. After `waitMs`
 *   the oldest records are dropped and the slow lane reads on its own.
 * - A lane whose lease went to another worker is forgotten (`forget`, and in any case after
 *   `liveMs` without a read), so nothing waits or keeps records for it. A lane forgotten while its
 *   read was in flight still gets a right answer: a window started again never trusts a short read
 *   made at the old one's end.
 */
import type { QueueRecord } from '../queue/event-queue.js';

export interface SharedPartitionReadsOptions {
  /** The window's bound, in records. */
  readonly maxRecords: number;
  /** The longest a lane waits for a slower one before the window drops what that lane has not read; 0: never waits. */
  readonly waitMs?: number;
  /** A lane that has not read for this long is not waited for, nor kept the window for. */
  readonly liveMs?: number;
  readonly now?: () => number;
}

export const SHARED_READ_WAIT_MS = 1_000;
export const SHARED_READ_LIVE_MS = 10_000;

export class SharedPartitionReads {
  readonly #read: (fromSeq: number, limit: number) => Promise<QueueRecord[]>;
  readonly #maxRecords: number;
  readonly #waitMs: number;
  readonly #liveMs: number;
  readonly #now: () => number;
  /** The partition's records with seq in [#start, #end), ascending; no window while #open is false. */
  #records: QueueRecord[] = [];
  #start = 0;
  #end = 0;
  #open = false;
  /** Each lane's last read: where it started and when. */
  readonly #lanes = new Map<string, { fromSeq: number; at: number }>();
  /** The read at #end in flight, if any (one at a time). */
  #extending: Promise<number> | null = null;
  /** Lanes waiting for a slower lane to read on. */
  #waiting: (() => void)[] = [];
  /** Records served from the window, and read from the database (for the benchmark's figures). */
  readonly counts = { served: 0, read: 0 };

  constructor(read: (fromSeq: number, limit: number) => Promise<QueueRecord[]>, options: SharedPartitionReadsOptions) {
    if (!(options.maxRecords >= 1)) throw new Error('maxRecords must be at least 1');
    this.#read = read;
    this.#maxRecords = options.maxRecords;
    this.#waitMs = options.waitMs ?? SHARED_READ_WAIT_MS;
    this.#liveMs = options.liveMs ?? SHARED_READ_LIVE_MS;
    // A monotonic clock: a wall clock stepped back would stretch a wait by as much.
    this.#now = options.now ?? (() => performance.now());
  }

  /** The records `lane` would read from the partition from `fromSeq` on, at most `limit` (fewer when the queue has no more now). */
  async read(lane: string, fromSeq: number, limit: number): Promise<QueueRecord[]> {
    if (limit <= 0) return [];
    this.#lanes.set(lane, { fromSeq, at: this.#now() });
    this.#trim();
    let deadline: number | undefined;
    // A wait for a slower lane (each ends at the same deadline), or null when there is none to
    // make. Every wait is followed by a fresh look at the window: anything may have changed.
    const waitForSlowerLane = (): Promise<unknown> | null => {
      if (this.#waitMs <= 0 || !this.#someoneBehind(lane, fromSeq)) return null;
      deadline ??= this.#now() + this.#waitMs;
      const left = deadline - this.#now();
      return left > 0 ? this.#windowMoves(left) : null;
    };
    let atHead = false;
    // Between two awaits the window is looked at and changed in one synchronous run, so no other
    // lane's read sees it half changed, and it never starts again while a read at its end is in flight.
    for (;;) {
      if (this.#extending !== null) {
        await this.#extending.catch(() => undefined);
        continue;
      }
      // Behind the window: the slowest lane takes the window back (the others wait for it below);
      // any other reads on its own. Checked after every wait: this lane's own read-ahead may have
      // moved the window past fromSeq meanwhile.
      if (this.#open && fromSeq < this.#start) {
        if (this.#someoneBehind(lane, fromSeq)) return this.#direct(fromSeq, limit);
        this.#restart(fromSeq);
        // A short read at the old window's end says nothing of this one (this lane may have been
        // forgotten while that read was in flight, and the window moved past it meanwhile).
        atHead = false;
      }
      // Past the window's end while a slower lane reads inside it: wait for that lane to bring the
      // window here; after waitMs, read on its own (the window stays the slower lane's).
      if (this.#open && fromSeq > this.#end) {
        const wait = waitForSlowerLane();
        if (wait !== null) {
          await wait;
          continue;
        }
        if (this.#someoneInside(lane)) return this.#direct(fromSeq, limit);
      }
      if (!this.#open || fromSeq > this.#end) {
        this.#restart(fromSeq);
        atHead = false;
      }
      const at = this.#indexOf(fromSeq);
      const held = this.#records.length - at;
      if (held >= limit || atHead) return this.#serve(at, limit);
      const wanted = limit - held;
      const excess = this.#records.length + wanted - this.#maxRecords;
      if (excess > 0) {
        const wait = waitForSlowerLane();
        if (wait !== null) {
          await wait;
          continue;
        }
        // Make room, never from fromSeq on: the slower lanes now read on their own (and the slowest
        // takes the window back at its next read).
        const drop = Math.min(at, excess);
        this.#dropBefore(drop, drop === at ? fromSeq : this.#records[drop]!.seq);
      }
      const extending = this.#extend(wanted);
      this.#extending = extending;
      try {
        atHead = (await extending) < wanted;
      } finally {
        this.#extending = null;
      }
    }
  }

  /** `lane` reads here no more (its lease went to another worker): nothing waits for it, nor keeps the window for it. */
  forget(lane: string): void {
    this.#lanes.delete(lane);
    this.#trim();
    if (this.#lanes.size === 0) {
      this.#records = [];
      this.#start = this.#end;
    }
    this.#moved();
  }

  /** Records held now (for tests and the memory bound). */
  get held(): number {
    return this.#records.length;
  }

  async #direct(fromSeq: number, limit: number): Promise<QueueRecord[]> {
    const records = await this.#read(fromSeq, limit);
    this.counts.read += records.length;
    return records;
  }

  #serve(at: number, limit: number): QueueRecord[] {
    const records = this.#records.slice(at, at + limit);
    this.counts.served += records.length;
    return records;
  }

  /** Reads `wanted` more records at the window's end; how many it found. */
  async #extend(wanted: number): Promise<number> {
    const from = this.#end;
    const records = await this.#read(from, wanted);
    this.counts.read += records.length;
    // Only this read moves the end (the window starts again elsewhere only while no read is in
    // flight); a trim meanwhile moved the start only.
    if (records.length > 0) {
      for (let i = 0; i < records.length; i++) this.#records.push(records[i]!);
      this.#end = records[records.length - 1]!.seq + 1;
      this.#moved();
    }
    return records.length;
  }

  /** Index of the first held record at or after `seq`. */
  #indexOf(seq: number): number {
    const records = this.#records;
    let lo = 0;
    let hi = records.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (records[mid]!.seq < seq) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** A live lane other than `lane` last read from before `fromSeq`. */
  #someoneBehind(lane: string, fromSeq: number): boolean {
    for (const [name, last] of this.#lanes) if (name !== lane && last.fromSeq < fromSeq) return true;
    return false;
  }

  /** A live lane other than `lane` last read from inside the window. */
  #someoneInside(lane: string): boolean {
    for (const [name, last] of this.#lanes) if (name !== lane && last.fromSeq >= this.#start && last.fromSeq <= this.#end) return true;
    return false;
  }

  #restart(at: number): void {
    this.#records = [];
    this.#start = this.#end = at;
    this.#open = true;
    this.#moved();
  }

  /** True when the window moved (grew, dropped records, started again), false after `ms` without. */
  #windowMoves(ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        const i = this.#waiting.indexOf(wake);
        if (i >= 0) this.#waiting.splice(i, 1);
        resolve(false);
      }, ms);
      timer.unref?.();
      this.#waiting.push(wake);
    });
  }

  /** Forgets lanes gone quiet, and drops the records every live lane has read past. */
  #trim(): void {
    const now = this.#now();
    let lowest = Infinity;
    for (const [name, last] of this.#lanes) {
      if (now - last.at > this.#liveMs) this.#lanes.delete(name);
      else lowest = Math.min(lowest, last.fromSeq);
    }
    if (!this.#open || lowest === Infinity || lowest <= this.#start) return;
    const start = Math.min(lowest, this.#end);
    this.#dropBefore(this.#indexOf(start), start);
  }

  /**
   * Drops the first `count` held records; the window then starts at `start`, which the caller
   * chooses so that every record of [start, end) is still held.
   */
  #dropBefore(count: number, start: number): void {
    if (count > 0) this.#records = this.#records.slice(count);
    this.#start = Math.max(this.#start, start);
    this.#moved();
  }

  /** Wakes the lanes waiting for the window to move. */
  #moved(): void {
    if (this.#waiting.length === 0) return;
    const waiting = this.#waiting;
    this.#waiting = [];
    for (const wake of waiting) wake();
  }
}
