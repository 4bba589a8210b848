/**
 * The embedded profile's lifecycle store, `<env>/lifecycle.db`: deletion requests (written by the
 * CLI, carried out by the worker), the suppression list and the deletion audit log.
 *
 * Why a file of its own: the view files have one writer each (their partition's consumer thread)
 * and the CLI only reads them; a deletion is therefore a durable request here that the worker
 * carries out in small batches (lifecycle-runner.ts), and the CLI waits for its outcome.
 *
 * Identifiers in clear: a pending request holds the identifier (or event id) it targets, because
 * the worker must look it up in the view when it runs; the column is cleared in the transaction that
 * marks the request done. The suppression list and the audit log hold only digests
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
import { identifierDigest } from './identifier-digest.js';

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
  result TEXT
);
CREATE INDEX IF NOT EXISTS deletion_requests_pending ON deletion_requests (state) WHERE state = 'pending';
CREATE TABLE IF NOT EXISTS suppressions (
  data_set_id TEXT NOT NULL,
  digest TEXT NOT NULL,
  request_id INTEGER NOT NULL,
  added_at INTEGER NOT NULL,
  PRIMARY KEY (data_set_id, digest)
) WITHOUT ROWID;
`;

export type DeletionKind = 'forget_identifier' | 'forget_identity' | 'delete_event';

export interface DeletionResult {
  readonly view_records: number;
  readonly identities: number;
  readonly identifier_links: number;
  readonly queue_events: number;
  readonly suppressed_identifiers: number;
}

export interface DeletionRequest {
  readonly id: number;
  readonly dataSetId: string;
  readonly kind: DeletionKind;
  /** The identifier, identity key or event id; null once done (README "Data lifecycle"). */
  readonly target: string | null;
  readonly targetDigest: string;
  readonly suppress: boolean;
  /** The queue's last sequence number when requested: queued copies up to it are erased. */
  readonly boundSeq: number;
  readonly actor: string;
  readonly requestedAt: number;
  readonly state: 'pending' | 'done';
  readonly doneAt: number | null;
  readonly result: DeletionResult | null;
}

interface RequestRow {
  id: number;
  data_set_id: string;
  kind: DeletionKind;
  target: string | null;
  target_digest: string;
  suppress: number;
  bound_seq: number;
  actor: string;
  requested_at: number;
  state: 'pending' | 'done';
  done_at: number | null;
  result: string | null;
}

const requestOf = (r: RequestRow): DeletionRequest => ({
  id: r.id,
  dataSetId: r.data_set_id,
  kind: r.kind,
  target: r.target,
  targetDigest: r.target_digest,
  suppress: r.suppress === 1,
  boundSeq: r.bound_seq,
  actor: r.actor,
  requestedAt: r.requested_at,
  state: r.state,
  doneAt: r.done_at,
  result: r.result === null ? null : (JSON.parse(r.result) as DeletionResult),
});

export function lifecycleDbFile(environmentDir: string): string {
  return join(environmentDir, 'lifecycle.db');
}

export class SqliteLifecycleStore {
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
    this.#db.prepare('INSERT OR IGNORE INTO lifecycle_meta (id, digest_key, version) VALUES (1, ?, 0)').run(randomBytes(32));
    this.#key = this.#db.prepare('SELECT digest_key FROM lifecycle_meta WHERE id = 1').pluck().get() as Buffer;
  }

  /** Digest of an identifier (or event id) of a data set under this store's key. */
  digest(dataSetId: string, value: string): string {
    return identifierDigest(this.#key, dataSetId, value);
  }

  get digestKey(): Buffer {
    return this.#key;
  }

  request(input: { dataSetId: string; kind: DeletionKind; target: string; suppress: boolean; boundSeq: number; actor: string; nowMs?: number }): DeletionRequest {
    const row = this.#db
      .prepare(
        `INSERT INTO deletion_requests (data_set_id, kind, target, target_digest, suppress, bound_seq, actor, requested_at, state)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending') RETURNING *`,
      )
      .get(input.dataSetId, input.kind, input.target, this.digest(input.dataSetId, input.target), input.suppress ? 1 : 0, input.boundSeq, input.actor, input.nowMs ?? Date.now()) as RequestRow;
    return requestOf(row);
  }

  get(id: number): DeletionRequest | null {
    const row = this.#db.prepare('SELECT * FROM deletion_requests WHERE id = ?').get(id) as RequestRow | undefined;
    return row ? requestOf(row) : null;
  }

  pending(): DeletionRequest[] {
    return (this.#db.prepare("SELECT * FROM deletion_requests WHERE state = 'pending' ORDER BY id").all() as RequestRow[]).map(requestOf);
  }

  /** The audit log: every request, newest first (targets of done requests are cleared). */
  audit(dataSetId?: string, limit = 1000): DeletionRequest[] {
    const rows =
      dataSetId === undefined
        ? this.#db.prepare('SELECT * FROM deletion_requests ORDER BY id DESC LIMIT ?').all(limit)
        : this.#db.prepare('SELECT * FROM deletion_requests WHERE data_set_id = ? ORDER BY id DESC LIMIT ?').all(dataSetId, limit);
    return (rows as RequestRow[]).map(requestOf);
  }

  /** Adds digests to a data set's suppression list (idempotent); returns how many were new. */
  suppress(dataSetId: string, digests: readonly string[], requestId: number, nowMs = Date.now()): number {
    return this.#db.transaction(() => {
      const insert = this.#db.prepare('INSERT OR IGNORE INTO suppressions (data_set_id, digest, request_id, added_at) VALUES (?, ?, ?, ?)');
      let added = 0;
      for (const d of digests) added += insert.run(dataSetId, d, requestId, nowMs).changes;
      if (added > 0) this.#db.prepare('UPDATE lifecycle_meta SET version = version + 1 WHERE id = 1').run();
      return added;
    }).immediate();
  }

  /** Marks a request done with its counts and clears its target (the only clear identifier kept here). */
  complete(id: number, result: DeletionResult, nowMs = Date.now()): void {
    this.#db
      .prepare("UPDATE deletion_requests SET state = 'done', done_at = ?, result = ?, target = NULL WHERE id = ?")
      .run(nowMs, JSON.stringify(result), id);
    // The WAL still holds the page with the target in clear: copy it back and truncate the WAL now.
    this.#db.pragma('wal_checkpoint(TRUNCATE)');
  }

  close(): void {
    if (this.#db.open) this.#db.close();
  }
}

/**
 * The suppression list as a consumer thread sees it: digests by data set, reloaded when the
 * store's version moved (checked at most once per `checkEveryMs`).
 */
export class SuppressionList {
  readonly #file: string;
  #db: Database.Database | null = null;
  #key: Buffer | null = null;
  #version = -1;
  #byDataSet = new Map<string, Set<string>>();
  #checkedAt = 0;
  readonly #checkEveryMs: number;

  constructor(file: string, options: { checkEveryMs?: number } = {}) {
    this.#file = file;
    this.#checkEveryMs = options.checkEveryMs ?? 200;
  }

  /** Reloads when changed; cheap when not (one primary-key read). */
  refresh(nowMs = Date.now()): void {
    if (nowMs - this.#checkedAt < this.#checkEveryMs) return;
    this.#checkedAt = nowMs;
    if (!this.#db) {
      try {
        this.#db = new Database(this.#file, { readonly: true, fileMustExist: true });
        this.#db.pragma('busy_timeout = 5000');
      } catch {
        return; // no lifecycle.db yet: nothing is suppressed
      }
    }
    const meta = this.#db.prepare('SELECT digest_key, version FROM lifecycle_meta WHERE id = 1').get() as { digest_key: Buffer; version: number } | undefined;
    if (!meta || meta.version === this.#version) return;
    const next = new Map<string, Set<string>>();
    for (const row of this.#db.prepare('SELECT data_set_id, digest FROM suppressions').all() as { data_set_id: string; digest: string }[]) {
      let set = next.get(row.data_set_id);
      if (!set) next.set(row.data_set_id, (set = new Set()));
      set.add(row.digest);
    }
    this.#key = meta.digest_key;
    this.#byDataSet = next;
    this.#version = meta.version;
  }

  /** Whether any of the identifiers is suppressed in the data set. */
  suppressed(dataSetId: string, identifiers: readonly string[]): boolean {
    const set = this.#byDataSet.get(dataSetId);
    if (!set || identifiers.length === 0) return false;
    for (const identifier of identifiers) if (set.has(identifierDigest(this.#key!, dataSetId, identifier))) return true;
    return false;
  }

  close(): void {
    this.#db?.close();
    this.#db = null;
  }
}
