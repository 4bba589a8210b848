/**
 * The durable queue on PostgreSQL, shared by every node of a cluster. Same contract and the same
 * segment layout as the SQLite queue (one row per request, events first_seq .. first_seq+count-1).
 *
 * Group commit: at most one flush in flight per process. Appends that arrive meanwhile wait and go
 * into the next flush together: ONE statement, in autocommit, that takes a range of sequence
 * numbers from `queue_head` and inserts every pending request as a row of a multi-row INSERT. The
 * statement's implicit COMMIT returns only after PostgreSQL flushed the WAL (fsync; with a
 * synchronous standby, after the standby confirmed too): only then do the appends resolve and the
 * requests answer 200/207.
 *
 * Ordering across nodes (DESIGN.md, "PostgreSQL"): the UPDATE of queue_head holds its row lock
 * until the commit, so a second node's flush waits and takes the next range after the first one's
 * commit is visible. Sequence numbers therefore become visible in order, without gaps: a reader
 * that saw seq N has seen everything below N, and consumers can never skip a late commit.
 */
import { IDLE_PROBE_MS, QueueHealthState } from './queue-health.js';
import { QueueUnavailableError } from '../errors.js';
import type { AppendReceipt, EventQueue, QueueAppend, QueueCommitObserver, QueueHealth, QueueRecord, ReadOptions } from './event-queue.js';
import { appendSegmentRecords, segmentEventsOfText, type SegmentHeader } from './segment-records.js';
import { queuePartitionOf } from '../postgres/partitions.js';
import type { Pool, PoolClient } from '../postgres/database.js';

interface PendingAppend {
  readonly params: unknown[];
  readonly count: number;
  readonly resolve: (receipt: AppendReceipt) => void;
  readonly reject: (error: Error) => void;
}

/** Upper bounds per commit: events (like the SQLite queue) and rows (bind parameters: 11 per row, at most 65,535). */
const MAX_EVENTS_PER_COMMIT = 20_000;
const MAX_ROWS_PER_COMMIT = 4_000;
const COLUMNS = 12;
const HOUR_MS = 3_600_000;
/** A probe that gets no answer within this is a failure (connect included). */
export const PROBE_TIMEOUT_MS = 5_000;

/** The statement of a flush of `rows` requests, by size (the text is reused, the plan is cheap). */
const statements = new Map<number, string>();
function insertStatement(rows: number): string {
  let text = statements.get(rows);
  if (text) return text;
  const values: string[] = [];
  for (let r = 0; r < rows; r++) {
    const p = (i: number) => `$${2 + r * COLUMNS + i}`;
    values.push(
      `(${p(0)}::bigint, ${p(1)}::integer, ${p(2)}::bigint, ${p(3)}, ${p(4)}, ${p(5)}, ${p(6)}::integer, ${p(7)}::smallint, ${p(8)}::boolean, ${p(9)}, ${p(10)}, ${p(11)}::bigint)`,
    );
  }
  // 12 values per row: offset, count, received_at, data set, key, request, policy, part, raw, events, metas, merge window.
  // The same statement adds the events to queue_accepted per data set and hour of arrival, so the
  // accepted counts of `stats` are committed with the events (never lost in a crash). The upsert
  // reads `head` (its aggregate consumes all input before writing), so it always locks its rows
  // after the queue_head row: commits of several nodes cannot deadlock on them.
  text =
    `WITH head AS (UPDATE queue_head SET next_seq = next_seq + $1 WHERE id = 1 RETURNING next_seq - $1 AS base), ` +
    `v(off, n, received_at, ds, key_id, request_id, policy, part, raw, events, metas, merge_window) AS (VALUES ${values.join(', ')}), ` +
    `accepted AS (INSERT INTO queue_accepted (data_set_id, hour, n) ` +
    `SELECT v.ds, v.received_at - v.received_at % ${HOUR_MS}, SUM(v.n) FROM v, head GROUP BY 1, 2 ` +
    `ON CONFLICT (data_set_id, hour) DO UPDATE SET n = queue_accepted.n + EXCLUDED.n) ` +
    `INSERT INTO queue_segments (first_seq, event_count, received_at, data_set_id, key_id, request_id, policy_version, part, raw, events, metas, merge_window_ms) ` +
    `SELECT head.base + v.off, v.n, v.received_at, v.ds, v.key_id, v.request_id, v.policy, v.part, v.raw, v.events, v.metas, v.merge_window ` +
    `FROM head, v ` +
    `RETURNING (SELECT base FROM head) AS base`;
  if (statements.size < 256) statements.set(rows, text);
  return text;
}

export class PostgresEventQueue implements EventQueue {
  readonly #pool: Pool;
  readonly #observer: QueueCommitObserver | undefined;
  #pending: PendingAppend[] = [];
  #inFlight = false;
  readonly #health: QueueHealthState;
  #closed = false;
  #drained: (() => void) | null = null;
  /** A probe under way (it never holds up an append): what ends it at close(). */
  #probing: (() => void) | null = null;
  /** Commits settled (stored or failed) so far: a probe that saw one settle while it ran says nothing. */
  #commitsSettled = 0;

  constructor(pool: Pool, observer?: QueueCommitObserver, options: { readonly idleProbeMs?: number } = {}) {
    this.#pool = pool;
    this.#observer = observer;
    // Also probed while idle: the database can go away while no sender sends (queue-health.ts).
    this.#health = new QueueHealthState(observer, () => this.#probe(), { idleProbeMs: options.idleProbeMs ?? IDLE_PROBE_MS });
  }

  /**
   * The probe, while not writable and while idle: the queue head's row lock taken and let go (the
   * row every commit locks; a tiny write: it fails where a commit would, on a read-only server too),
   * only when no commit is in flight or waiting (a real commit is as good a probe). It never holds
   * up an append, and it gives up after PROBE_TIMEOUT_MS: a connection gone silent (a frozen host,
   * a partition without a reset) would otherwise leave it pending for good and readiness at 200;
   * its connection is then destroyed, not given back.
   */
  #probe(): void {
    if (this.#probing !== null || this.#inFlight || this.#pending.length > 0 || this.#closed) return;
    let client: PoolClient | null = null;
    let over = false;
    const commitsBefore = this.#commitsSettled;
    // Runs once per probe: the answer, the failure, the time-out or close(), whichever comes first.
    const finish = (health: QueueHealth) => {
      if (over) return;
      over = true;
      clearTimeout(timer);
      // A failed probe's connection is destroyed, not given back: it may be the silent one.
      client?.release(!health.writable);
      client = null;
      this.#probing = null;
      // A commit that settled meanwhile (appends do not wait for a probe) is newer news than it.
      if (!this.#closed && this.#commitsSettled === commitsBefore) this.#health.set(health);
    };
    const timer = setTimeout(() => finish({ writable: false, lastError: `queue probe got no answer within ${PROBE_TIMEOUT_MS} ms` }), PROBE_TIMEOUT_MS);
    this.#probing = () => finish({ writable: false, lastError: 'queue closed' });
    this.#pool.connect().then(
      (connected) => {
        // A connection that arrives after the time-out (or close) is destroyed, never left checked out.
        if (over) return void connected.release(true);
        client = connected;
        connected.query('SELECT next_seq FROM queue_head WHERE id = 1 FOR UPDATE').then(
          () => finish({ writable: true, lastError: null }),
          (error: Error) => finish({ writable: false, lastError: error.message }),
        );
      },
      (error: Error) => finish({ writable: false, lastError: error.message }),
    );
  }

  #flush(): void {
    if (this.#inFlight) return;
    if (this.#pending.length === 0) {
      this.#drained?.();
      return;
    }
    let events = 0;
    let take = 0;
    while (
      take < this.#pending.length &&
      take < MAX_ROWS_PER_COMMIT &&
      (take === 0 || events + this.#pending[take]!.count <= MAX_EVENTS_PER_COMMIT)
    ) {
      events += this.#pending[take]!.count;
      take++;
    }
    const group = this.#pending.splice(0, take);
    this.#inFlight = true;
    void this.#commit(group, events).finally(() => {
      this.#inFlight = false;
      this.#flush();
    });
  }

  async #commit(group: PendingAppend[], events: number): Promise<void> {
    const started = performance.now();
    const params: unknown[] = [events];
    const offsets: number[] = [];
    let offset = 0;
    for (const pending of group) {
      offsets.push(offset);
      pending.params[0] = offset;
      for (const value of pending.params) params.push(value);
      offset += pending.count;
    }
    try {
      const result = await this.#pool.query<{ base: number }>(insertStatement(group.length), params);
      const base = result.rows[0]!.base;
      this.#commitsSettled++;
      this.#health.set({ writable: true, lastError: null });
      group.forEach((pending, i) => pending.resolve({ firstSeq: base + offsets[i]!, count: pending.count }));
      this.#observer?.onCommit({ requests: group.length, events, durationMs: performance.now() - started });
    } catch (cause) {
      const message = cause instanceof Error ? cause.message : String(cause);
      this.#commitsSettled++;
      this.#health.set({ writable: false, lastError: message });
      this.#observer?.onFailure({ requests: group.length, events });
      // The outcome of a commit whose connection broke is unknown: the events may be stored. The
      // request answers 500 and the sender retries; records merge on (data_set_id, id).
      const error = new QueueUnavailableError(`queue commit failed: ${message}`, { cause });
      for (const pending of group) pending.reject(error);
    }
  }

  append(batch: QueueAppend): Promise<AppendReceipt> {
    if (this.#closed) return Promise.reject(new QueueUnavailableError('queue is closed'));
    const hasMeta = batch.metas.some((meta) => meta !== undefined);
    const raw = batch.rawBody !== undefined;
    const events = raw ? Buffer.from(batch.rawBody!.buffer, batch.rawBody!.byteOffset, batch.rawBody!.byteLength).toString('utf8') : JSON.stringify(batch.events);
    const params: unknown[] = [
      0,
      batch.events.length,
      batch.receivedAt,
      batch.dataSetId,
      batch.keyId,
      batch.requestId,
      batch.policyVersion,
      queuePartitionOf(batch.dataSetId),
      raw,
      events,
      hasMeta ? JSON.stringify(batch.metas.map((meta) => meta ?? null)) : null,
      batch.mergeWindowMs,
    ];
    return new Promise<AppendReceipt>((resolve, reject) => {
      this.#pending.push({ params, count: batch.events.length, resolve, reject });
      this.#flush();
    });
  }

  read(options: ReadOptions): Promise<QueueRecord[]> {
    return readSegments(this.#pool, options);
  }

  health(): QueueHealth {
    return this.#health.current;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    if (this.#inFlight || this.#pending.length > 0) {
      await new Promise<void>((resolve) => (this.#drained = resolve));
    }
    this.#closed = true;
    this.#health.stop();
    // A probe waiting on a silent connection: ended and its connection destroyed, so that ending
    // the pool does not wait for it.
    this.#probing?.();
  }
}

interface SegmentRow extends SegmentHeader {
  event_count: number;
  raw: boolean;
  events: string;
  metas: string | null;
}

/**
 * Records from `fromSeq` on, optionally of one data set or one partition, in sequence order.
 *
 * Segments are fetched a page at a time, and a page holds only the segments the read needs: the
 * headers of up to `pageRows` segments are scanned (the index, no event text), and the event text
 * is fetched for those whose events before them number fewer than `limit`. A page cut by row count
 * alone would fetch (and the driver decode) hundreds of segments of 1,000 events to use two: a read
 * of 2,000 records fetched up to 500 MB, every batch (issue 30's seventh round; it was the largest
 * item of the PostgreSQL consumer's profile).
 */
export async function readSegments(
  pool: Pick<Pool, 'query'>,
  options: ReadOptions & { readonly part?: number },
): Promise<QueueRecord[]> {
  const records: QueueRecord[] = [];
  if (options.limit <= 0) return records;
  // The filters' values come last, numbered after the statement's own parameters (`first` of them).
  const values: unknown[] = [];
  const columns: string[] = [];
  if (options.dataSetId !== undefined) {
    values.push(options.dataSetId);
    columns.push('data_set_id');
  }
  if (options.part !== undefined) {
    values.push(options.part);
    columns.push('part');
  }
  const where = (first: number) => columns.map((column, i) => ` AND ${column} = $${first + i + 1}`).join('');
  // The segment holding fromSeq starts at or before it.
  const start = await pool.query<{ s: number }>(
    `SELECT COALESCE(MAX(first_seq), 0) AS s FROM queue_segments WHERE first_seq <= $1${where(1)}`,
    [options.fromSeq, ...values],
  );
  let after = start.rows[0]!.s - 1;
  const pageRows = Math.max(8, Math.min(500, Math.ceil(options.limit / 4)));
  // $1: read after this first_seq; $2: events still wanted.
  const page = `WITH h AS (SELECT first_seq, event_count FROM queue_segments WHERE first_seq > $1${where(2)} ORDER BY first_seq LIMIT ${pageRows}),
      c AS (SELECT first_seq, SUM(event_count) OVER (ORDER BY first_seq) - event_count AS before, COUNT(*) OVER () AS headers FROM h)
    SELECT s.first_seq, s.event_count, s.received_at, s.data_set_id, s.key_id, s.request_id, s.policy_version, s.merge_window_ms, s.raw, s.events, s.metas, c.headers
    FROM c JOIN queue_segments s ON s.first_seq = c.first_seq WHERE c.before < $2 ORDER BY s.first_seq`;
  for (;;) {
    // Events erased (null) or before fromSeq count in `before` but not in `records`: ask for what is
    // still missing, and read on while a page was cut short of the segments it scanned.
    const { rows } = await pool.query<SegmentRow & { headers: number }>(page, [after, options.limit - records.length, ...values]);
    for (const row of rows) {
      after = row.first_seq;
      if (row.first_seq + row.event_count <= options.fromSeq) continue;
      const events = segmentEventsOfText(row.events, row.raw);
      if (appendSegmentRecords(records, row, events, row.metas, options.fromSeq, options.limit)) return records;
    }
    const headers = rows.length === 0 ? 0 : Number(rows[0]!.headers);
    if (rows.length === headers && headers < pageRows) return records;
  }
}

/**
 * Accepted-event counter rows (name `accepted`) of a data set from the hour `sinceHourMs` on,
 * counted by the commits that queued the events (see insertStatement).
 */
export async function acceptedCounts(pool: Pick<Pool, 'query'>, dataSetId: string, sinceHourMs: number): Promise<{ hour: number; name: string; n: number }[]> {
  const { rows } = await pool.query<{ hour: number; n: number }>(
    'SELECT hour, n FROM queue_accepted WHERE data_set_id = $1 AND hour >= $2 ORDER BY hour',
    [dataSetId, sinceHourMs],
  );
  return rows.map((r) => ({ hour: Number(r.hour), name: 'accepted', n: Number(r.n) }));
}
