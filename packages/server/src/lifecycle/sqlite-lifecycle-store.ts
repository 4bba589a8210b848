/**
 * The embedded profile's lifecycle store, `<env>/lifecycle.db`: deletion requests (written by the
 * CLI, carried out by the worker), the suppression list and the deletion audit log.
 *
 * Why a file of its own: the view files have one writer each (their partition's consumer thread)
 * and the CLI only reads them; a deletion is therefore a durable request here that the worker
 * carries out in small batches (lifecycle-runner.ts), and the CLI waits for its outcome.
 *
 * Identifiers in clear: a pending request holds the identifier (or event id) it targets, because
 * the worker must look it up in the view when it runs. `complete` clears the column while the request
 * is still pending (its counts settled: what is left needs no target), then clears the old copies
 * (the WAL's older page images, and a rebuilt page's unallocated space: fs/old-copies.ts), and marks
 * the request done only once that succeeded: a reader holding an older snapshot open (a backup, a
 * sqlite3 shell) keeps the WAL from being cut, and the request pending until it lets go ("done"
 * means no byte is left). The suppression list and the audit log hold only digests
 * (identifier-digest.ts) under a random key kept here (`lifecycle_meta.digest_key`): they keep
 * identifiers out of sight of whoever reads the audit log or an export, not of whoever holds this
 * file (who, in the embedded profile, holds master.key and the view files too).
 *
 * `lifecycle_meta.version` increases with every new suppression, so that consumer threads reload
 * the list only when it changed (one indexed read per batch otherwise).
 */
import Database from 'better-sqlite3';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { prepareDatabaseFile } from '../fs/durable-files.js';
import { ownerIsDead, SELF_OWNER } from './claim-owner.js';
import { eventDigest, identifierDigest, suppressionDigest, targetDigest } from './identifier-digest.js';
import { checkpointPassive } from '../fs/wal-truncation.js';
import { clearOldCopies } from '../fs/old-copies.js';
import {
  deletionRequestOf,
  type DeletionRequest,
  type DeletionRequestRow,
  type DeletionResult,
  type LifecycleStore,
  type NewDeletionRequest,
  type SuppressionFilter,
  type TargetDigester,
  WalBusyError,
} from './lifecycle-backend.js';
import { SuppressionSet } from './suppression-set.js';

export const LIFECYCLE_SCHEMA = `
CREATE TABLE IF NOT EXISTS lifecycle_meta (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  digest_key BLOB NOT NULL,
  version INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS deletion_requests (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  data_set_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  target TEXT,
  target_digest TEXT NOT NULL,
  suppress INTEGER NOT NULL,
  bound_seq INTEGER NOT NULL,
  actor TEXT NOT NULL,
  requested_at INTEGER NOT NULL,
  state TEXT NOT NULL,
  done_at INTEGER,
  result TEXT,
  claimed_until INTEGER
);
CREATE INDEX IF NOT EXISTS deletion_requests_pending ON deletion_requests (state) WHERE state = 'pending';
CREATE TABLE IF NOT EXISTS deleted_events (
  data_set_id TEXT NOT NULL,
  event_digest TEXT NOT NULL,
  request_id INTEGER NOT NULL,
  PRIMARY KEY (data_set_id, event_digest)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS suppressions (
  data_set_id TEXT NOT NULL,
  digest TEXT NOT NULL,
  request_id INTEGER NOT NULL,
  added_at INTEGER NOT NULL,
  PRIMARY KEY (data_set_id, digest)
) WITHOUT ROWID;
`;

/**
 * TRUNCATE attempts per round when a request is completed (fs/wal-truncation.ts: 250 ms each, 50 ms
 * apart): each holds lifecycle.db's writers (the CLI) off while it waits.
 */
const LIFECYCLE_WAL_ATTEMPTS = 8;

export function lifecycleDbFile(environmentDir: string): string {
  return join(environmentDir, 'lifecycle.db');
}

export class SqliteLifecycleStore implements LifecycleStore {
  readonly #db: Database.Database;
  readonly #key: Buffer;

  constructor(file: string) {
    prepareDatabaseFile(file); // 0600 in a 0700 directory, durable directory entries
    this.#db = new Database(file);
    this.#db.pragma('busy_timeout = 5000');
    this.#db.pragma('journal_mode = WAL');
    this.#db.pragma('synchronous = FULL');
    // Deleted rows (cleared targets) are overwritten with zeros, not left in free pages.
    this.#db.pragma('secure_delete = ON');
    this.#db.exec(LIFECYCLE_SCHEMA);
    // Who holds a claim (claim-owner.ts), on files created before it existed too.
    const columns = this.#db.prepare('SELECT name FROM pragma_table_info(?)').pluck().all('deletion_requests') as string[];
    if (!columns.includes('claimed_by')) {
      try {
        this.#db.exec('ALTER TABLE deletion_requests ADD COLUMN claimed_by TEXT');
      } catch (error) {
        if (!/duplicate column/.test((error as Error).message)) throw error; // another process added it meanwhile
      }
    }
    this.#db.prepare('INSERT OR IGNORE INTO lifecycle_meta (id, digest_key, version) VALUES (1, ?, 0)').run(randomBytes(32));
    this.#key = this.#db.prepare('SELECT digest_key FROM lifecycle_meta WHERE id = 1').pluck().get() as Buffer;
  }

  async digest(dataSetId: string, value: string): Promise<string> {
    return suppressionDigest(this.#key, dataSetId, value);
  }

  async request(input: NewDeletionRequest): Promise<DeletionRequest> {
    // all(), not get(): get() stops at the RETURNING row, and the statement's commit then runs when
    // it is reset, where an error (SQLITE_FULL on a full disk) is not reported: the request was
    // returned but never stored (issue 29).
    const [row] = this.#db
      .prepare(
        `INSERT INTO deletion_requests (data_set_id, kind, target, target_digest, suppress, bound_seq, actor, requested_at, state)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending') RETURNING *`,
      )
      .all(input.dataSetId, input.kind, input.target, targetDigest(this.#key, input.dataSetId, input.kind, input.target), input.suppress ? 1 : 0, input.boundSeq, input.actor, input.nowMs ?? Date.now()) as DeletionRequestRow[];
    return deletionRequestOf(row!);
  }

  async get(id: number): Promise<DeletionRequest | null> {
    const row = this.#db.prepare('SELECT * FROM deletion_requests WHERE id = ?').get(id) as DeletionRequestRow | undefined;
    return row ? deletionRequestOf(row) : null;
  }

  async pending(): Promise<DeletionRequest[]> {
    return (this.#db.prepare("SELECT * FROM deletion_requests WHERE state = 'pending' ORDER BY id").all() as DeletionRequestRow[]).map(deletionRequestOf);
  }

  async audit(dataSetId?: string, limit = 1000): Promise<DeletionRequest[]> {
    const rows =
      dataSetId === undefined
        ? this.#db.prepare('SELECT * FROM deletion_requests ORDER BY id DESC LIMIT ?').all(limit)
        : this.#db.prepare('SELECT * FROM deletion_requests WHERE data_set_id = ? ORDER BY id DESC LIMIT ?').all(dataSetId, limit);
    return (rows as DeletionRequestRow[]).map(deletionRequestOf);
  }

  async after(afterId: number, limit: number): Promise<DeletionRequest[]> {
    return (this.#db.prepare('SELECT * FROM deletion_requests WHERE id > ? ORDER BY id LIMIT ?').all(afterId, limit) as DeletionRequestRow[]).map(deletionRequestOf);
  }

  async targetDigester(): Promise<TargetDigester> {
    const key = this.#key;
    return (dataSetId, kind, value) => targetDigest(key, dataSetId, kind, value);
  }

  async claim(id: number, forMs: number, nowMs = Date.now(), owner = SELF_OWNER): Promise<boolean> {
    return this.#db.transaction(() => {
      const row = this.#db.prepare('SELECT state, claimed_until, claimed_by FROM deletion_requests WHERE id = ?').get(id) as
        | { state: string; claimed_until: number | null; claimed_by: string | null }
        | undefined;
      if (!row || row.state !== 'pending') return false;
      const free = row.claimed_until === null || row.claimed_until < nowMs || row.claimed_by === owner || ownerIsDead(row.claimed_by);
      if (!free) return false;
      this.#db.prepare('UPDATE deletion_requests SET claimed_until = ?, claimed_by = ? WHERE id = ?').run(nowMs + forMs, owner, id);
      return true;
    }).immediate();
  }

  async settle(id: number, result: DeletionResult): Promise<void> {
    this.#db.prepare("UPDATE deletion_requests SET result = ? WHERE id = ? AND state = 'pending'").run(JSON.stringify(result), id);
  }

  async suppress(dataSetId: string, digests: readonly string[], requestId: number, nowMs = Date.now()): Promise<number> {
    return this.#db.transaction(() => {
      const insert = this.#db.prepare('INSERT OR IGNORE INTO suppressions (data_set_id, digest, request_id, added_at) VALUES (?, ?, ?, ?)');
      let added = 0;
      for (const d of digests) added += insert.run(dataSetId, d, requestId, nowMs).changes;
      if (added > 0) this.#db.prepare('UPDATE lifecycle_meta SET version = version + 1 WHERE id = 1').run();
      return added;
    }).immediate();
  }

  async complete(id: number, result: DeletionResult, nowMs = Date.now()): Promise<void> {
    const text = JSON.stringify(result);
    // 1. The target goes while the request stays pending: a worker that takes over finishes it from
    // the settled counts, which need no target (secure_delete zeroes the old cell's bytes).
    this.#db.prepare("UPDATE deletion_requests SET result = ?, target = NULL WHERE id = ? AND state = 'pending'").run(text, id);
    // 2. The WAL still holds older images of that page, the target in clear, and a page SQLite
    // rebuilt may keep an old copy of its cell in its unallocated space: the pages are scrubbed and
    // the WAL copied back and cut to zero bytes (fs/old-copies.ts), or the request is not done. A
    // reader that keeps an older snapshot open (a backup, a sqlite3 shell with a read transaction
    // open) keeps it so: the request stays pending and the runner tries again next round. A PASSIVE checkpoint (which never holds writers off) tells first
    // whether one does (frames it could not copy back), so that such a reader does not get the
    // TRUNCATE attempts, which hold the CLI's writers off while they wait, at every round; the few
    // TRUNCATE attempts are for a reader between two reads (the waiting CLI between two polls).
    if (!checkpointPassive(this.#db) || !(await clearOldCopies(this.#db, { attempts: LIFECYCLE_WAL_ATTEMPTS }))) {
      throw new WalBusyError('lifecycle.db could not be cleared of old copies yet (a reader holds it open); the request is finished at a later round');
    }
    // 3. Done: this commit's page images hold no target any more.
    this.#db.prepare("UPDATE deletion_requests SET state = 'done', done_at = ?, result = ? WHERE id = ? AND state = 'pending'").run(nowMs, text, id);
  }

  async noteDeletedEvents(dataSetId: string, eventIds: readonly string[], requestId: number): Promise<void> {
    if (eventIds.length === 0) return;
    this.#db.transaction(() => {
      const insert = this.#db.prepare('INSERT OR IGNORE INTO deleted_events (data_set_id, event_digest, request_id) VALUES (?, ?, ?)');
      for (const id of eventIds) insert.run(dataSetId, eventDigest(this.#key, dataSetId, id), requestId);
    }).immediate();
  }

  async deletedBy(dataSetId: string, eventId: string): Promise<DeletionRequest | null> {
    const row = (this.#db
      .prepare(
        `SELECT r.* FROM deleted_events d JOIN deletion_requests r ON r.id = d.request_id WHERE d.data_set_id = ? AND d.event_digest = ?
         UNION ALL
         SELECT * FROM deletion_requests WHERE data_set_id = ? AND kind = 'delete_event' AND target_digest = ? AND state = 'done'
         LIMIT 1`,
      )
      .get(dataSetId, eventDigest(this.#key, dataSetId, eventId), dataSetId, identifierDigest(this.#key, dataSetId, eventId)) ?? null) as DeletionRequestRow | null;
    return row ? deletionRequestOf(row) : null;
  }

  async close(): Promise<void> {
    if (this.#db.open) this.#db.close();
  }
}

/**
 * The suppression list as a consumer thread sees it: digests by data set, reloaded when the
 * store's version moved. The consumer calls `refresh` under the view's write lock before every
 * batch (consumer/view-consumer.ts).
 */
export class SuppressionList implements SuppressionFilter {
  readonly #file: string;
  #db: Database.Database | null = null;
  #version: Database.Statement | null = null;
  readonly #set = new SuppressionSet();

  constructor(file: string) {
    this.#file = file;
  }

  /** Reloads when changed; cheap when not (one primary-key read). */
  refresh(): void {
    if (!this.#db) {
      try {
        this.#db = new Database(this.#file, { readonly: true, fileMustExist: true });
        this.#db.pragma('busy_timeout = 5000');
      } catch {
        return; // no lifecycle.db yet: nothing is suppressed
      }
    }
    this.#version ??= this.#db.prepare('SELECT digest_key, version FROM lifecycle_meta WHERE id = 1');
    const meta = this.#version.get() as { digest_key: Buffer; version: number } | undefined;
    if (!meta || meta.version === this.#set.version) return;
    this.#set.load(meta.digest_key, meta.version, this.#db.prepare('SELECT data_set_id, digest FROM suppressions').all() as { data_set_id: string; digest: string }[]);
  }

  suppressed(dataSetId: string, identifiers: readonly string[]): boolean {
    return this.#set.suppressed(dataSetId, identifiers);
  }

  close(): void {
    this.#db?.close();
    this.#db = null;
  }
}
