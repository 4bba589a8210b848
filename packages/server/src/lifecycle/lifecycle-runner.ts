/**
 * The worker's data lifecycle (embedded profile): retention of the merged view and deletion
 * requests (`identities forget`, `events delete`), run in the worker process next to the consumer,
 * in small transactions with the event loop yielded between them (sqlite-view-eraser.ts says why
 * that is safe next to the partition threads).
 *
 * A deletion request waits until the consumer has applied the queue up to the request's bound B (the
 * queue's last sequence number when it was made); then every copy of the person's data that existed
 * at request time is in the view, where it is deleted, and in the queue, where it is erased
 * (sqlite-queue-eraser.ts). With --suppress, the identity's identifiers are suppressed only then
 * (not before the wait: an event queued before the request must still be applied, or the identity
 * and its other identifiers would never be found), then every record of the identity goes, those of
 * events sent after the request and applied meanwhile too; what the consumer applies after that is
 * dropped (view-applier.ts `suppressions`): a batch reads the list under the view's write lock, which
 * the view deletions take too (consumer/view-consumer.ts), so no batch applies under
 * the old list after them, however long it waited (no clock in the argument).
 *
 * What a request covers (issue 29, docs "Data lifecycle"): the events queued up to B, in the queue
 * and in the view alike. A view record whose first event was queued up to B is deleted; one first
 * queued after B stays, as its queued copy does. A deleted record takes the queued copies of its
 * event id with it: those up to B (whether or not they carried the person's identifiers), and a
 * re-send queued after B that it had merged (a "straddler", up to the record's last position), so
 * view and queue agree; a copy queued after that position was never in the record and stays.
 *
 * The sharded layout (sharded-view-eraser.ts): a record and its identity are in two files applied at
 * different queue offsets, so the data set's parts are held at one queue position (ViewEraser `hold`)
 * from before a request looks the identity up (and suppresses it) to its last view deletion, and while
 * a retention round deletes; a worker that restarts keeps the holds of pending requests and releases
 * the others.
 *
 * Crash safety (issue 29): the claim names its owner (claim-owner.ts), so a worker restarted after
 * a SIGKILL takes the request over at once, and renews it at every step. Every deletion is counted
 * by the transaction that makes it (the erasers' tallies), so the audit log's counts are exact over
 * all attempts. Order: (with --suppress) suppression (and a wait for older versions' consumers), view records,
 * queue copies (their body-log bytes zeroed and synced), the identity tree, then the counts are
 * settled in the request; then the tallies go,
 * the old copies are cleared (the pages' unallocated space zeroed, the WALs truncated:
 * fs/old-copies.ts), and only then is the request marked done: "done" means no byte is left.
 *
 * Space (issue 29): a person's deletion runs in transactions of a few hundred rows with a
 * checkpoint after each, so the WAL does not grow by the whole deletion; before each step it checks
 * the data dir's free space and waits (with a warning naming the request) while less than
 * `minFreeBytes` is free, rather than take the last bytes ingestion needs.
 *
 * Retention: every `everyMs`, per data set, records last updated (and whose event is stamped) before
 * T - viewRetentionMs - RETENTION_COMMIT_MARGIN_MS are deleted, EXPIRE_BATCH per transaction, with
 * their identities once those have no record left. T is now, or, while the consumer lags, the receipt
 * time of the first record of the data set's partition it has not applied (backend `appliedThrough`):
 * a record does not expire while an event that could merge into it waits in the queue, whatever the
 * lag, nor while a re-send of its event would still be accepted.
 */
import { setImmediate as yieldLoop } from 'node:timers/promises';
import { PartsHeldError } from './parts-fence.js';
import type { ControlPlane } from '../control/control-plane.js';
import { identifiersOf, normalizeEvent } from '../merged-view/identity.js';
import { recordKeyForId } from '../merged-view/merge.js';
import { canonicalIdentifier } from './identifier-digest.js';
import { equivalentIdentifiers } from './equivalent-identifiers.js';
import type { Logger } from '../observability/logger.js';
import { FailureLatch } from '../model/failure-latch.js';
import { OldCopiesSchedule } from '../fs/old-copies-schedule.js';
import {
  addCounts, zeroCounts, type DeletionRequest, type DeletionResult, type ErasedCounts, type EraserCursor, type IdentityToErase, type LifecycleBackend, type ViewEraser, SUPPRESSION_REFRESH_MS,
  WalBusyError,
} from './lifecycle-backend.js';

/**
 * What view retention adds to a data set's retention: a request being committed while a round runs
 * was received (and its event's age checked) before it, and a re-send in it must still find its
 * record. The other edges are the erasers' (an event stamped ahead of its receipt: ViewEraser
 * `expire`) and the consumer's lag (LifecycleBackend `appliedThrough`).
 */
export const RETENTION_COMMIT_MARGIN_MS = 5000;

/** Records per retention transaction: about 2 ms of the view file's write lock (bench/README.md "Data lifecycle"). */
export const EXPIRE_BATCH = 100;
const SCAN_BATCH = 2000;
/**
 * How long a claim lasts unless renewed; the owner renews it at every step. A claim whose owner is
 * known dead (same host) is taken over at once; one from another host once it lapsed.
 */
const CLAIM_MS = 30_000;
const QUEUE_PAGE = 50;
/** How often a hold of the sharded layout's parts looks whether they came together. */
const HOLD_POLL_MS = 20;
/** A hold that takes longer than this is logged (once per request). */
const HOLD_NOTICE_MS = 10_000;
/** Free bytes on the data dir under which a deletion waits (ECAPI_DELETION_MIN_FREE_MB overrides). */
export const DEFAULT_DELETION_MIN_FREE_BYTES = 8 * 1024 * 1024;
const SPACE_WAIT_MS = 1000;

export function deletionMinFreeBytes(env: NodeJS.ProcessEnv = process.env): number {
  const mb = Number(env.ECAPI_DELETION_MIN_FREE_MB);
  return Number.isFinite(mb) && mb >= 0 && env.ECAPI_DELETION_MIN_FREE_MB !== undefined && env.ECAPI_DELETION_MIN_FREE_MB !== '' ? mb * 1024 * 1024 : DEFAULT_DELETION_MIN_FREE_BYTES;
}

export interface LifecycleRunnerOptions {
  readonly backend: LifecycleBackend;
  readonly controlPlane: ControlPlane;
  readonly logger: Logger;
  /** How often view retention runs (default one minute). */
  readonly retentionEveryMs?: number;
  /**
   * After retention deleted rows, the whole clearing of old copies (the page-gap scrub, a VACUUM)
   * runs at most this often (fs/old-copies-schedule.ts; default 15 min, 0: every round); the WAL is
   * cut after every round.
   */
  readonly oldCopiesEveryMs?: number;
  /** A deletion waits while the data dir has less free space than this (default 8 MiB). */
  readonly minFreeBytes?: number;
}

class ClaimLost extends Error {}
/** The worker is stopping: the request stays pending (and claimed by a process about to exit). */
class Stopping extends Error {}

export class LifecycleRunner {
  readonly #o: LifecycleRunnerOptions;
  readonly #b: LifecycleBackend;
  #lastRetention = Number.NEGATIVE_INFINITY;
  #stopping = false;
  #spaceWarnedFor = new Set<number>();
  readonly #waitReason = new Map<number, string>();
  /** View erasers whose WAL may still hold old page images of records retention deleted (cut at every tick until done). */
  readonly #walDirty = new Set<ViewEraser>();
  /**
   * View erasers whose pages may still hold old copies of records retention deleted, by what they
   * clear (ViewEraser.oldCopiesScope): scrubbed when the schedule says so, not at every round.
   */
  readonly #scrubOwed = new Map<string | ViewEraser, ViewEraser>();
  /** Stores met since this process started (each owed one whole clearing at its first meeting). */
  readonly #scopesSeen = new Set<string | ViewEraser>();
  readonly #scrubs: OldCopiesSchedule;

  constructor(options: LifecycleRunnerOptions) {
    this.#o = options;
    this.#b = options.backend;
    this.#scrubs = new OldCopiesSchedule(options.oldCopiesEveryMs);
  }

  /** One round: due body-log overwrites, pending requests the consumer has caught up with, retention when due. */
  async tick(nowMs = Date.now()): Promise<void> {
    await this.#b.queue.overwritePending();
    const pending = await this.#b.store.pending();
    // Parts held by a worker that was killed, or by an attempt cut off (the sharded layout): those of
    // a pending request stay held for its next attempt; the others (a retention round, a request
    // since done) are let go. At every round: on PostgreSQL the killed worker may be another one.
    await this.#b.releaseStaleHolds?.(new Set(pending.map((r) => r.id)));
    for (const request of pending) {
      if (this.#stopping) return;
      if (!(await this.#b.applied(request.dataSetId, request.boundSeq))) {
        this.#waiting(request, 'the consumer has not applied the queue up to the request yet');
        continue; // not everything it must delete is in the view yet
      }
      if (!(await this.#b.store.claim(request.id, CLAIM_MS))) {
        this.#waiting(request, 'another live worker carries it out');
        continue;
      }
      try {
        await this.#carryOut(request);
      } catch (error) {
        if (error instanceof Stopping) return;
        if (error instanceof PartsHeldError) {
          this.#waiting(request, `the view's parts are held by deletion request ${error.holder}, which is carried out first`);
          continue;
        }
        if (error instanceof WalBusyError) {
          // Deleted, counts settled; a reader keeps a WAL from being cut: not done yet, tried next round.
          this.#waiting(request, error.message);
          continue;
        }
        if (!(error instanceof ClaimLost)) throw error;
        this.#o.logger.warn({ request_id: request.id }, 'deletion request taken over by another worker');
      }
    }
    if (nowMs - this.#lastRetention >= (this.#o.retentionEveryMs ?? 60_000)) {
      this.#lastRetention = nowMs;
      await this.#retention(nowMs);
    }
    await this.#clearRetentionCopies(nowMs);
  }

  /**
   * Expired records leave no old copy either: their WAL images go at the first tick after the round
   * (retried each tick while busy), their copies in the pages' unallocated space at the next whole
   * clearing the schedule allows (fs/old-copies-schedule.ts: a read of each file, at most every 15 min
   * by default), so that retention, which deletes at nearly every round, does not read every file
   * whole at every round.
   */
  async #clearRetentionCopies(nowMs: number): Promise<void> {
    if (this.#scrubs.due(nowMs)) {
      let complete = true;
      for (const [scope, eraser] of [...this.#scrubOwed]) {
        if (await eraser.clearOldCopies()) {
          this.#scrubOwed.delete(scope);
          this.#walDirty.delete(eraser);
        } else complete = false;
      }
      this.#scrubs.tried(nowMs, complete);
    }
    for (const eraser of [...this.#walDirty]) if (await eraser.clearOldCopies({ scrub: false })) this.#walDirty.delete(eraser);
  }

  /**
   * Until stopped: a tick a second (the next tick tries again). A failing spell (the database away)
   * is said once when it starts and once when a round succeeds again, not once a second.
   */
  async run(stopped: Promise<void>, everyMs = 1000): Promise<void> {
    void stopped.then(() => (this.#stopping = true));
    const latch = new FailureLatch(
      (error) => this.#o.logger.error({ err: { message: error.message } }, 'data lifecycle round failed; retrying every second (said once until a round succeeds)'),
      () => this.#o.logger.info({}, 'data lifecycle rounds recovered'),
    );
    while (!this.#stopping) {
      await this.tick().then(
        () => latch.succeeded(),
        (error: Error) => latch.failed(error),
      );
      await Promise.race([stopped, new Promise((r) => setTimeout(r, everyMs).unref())]);
    }
  }

  /** Why a pending request waits, logged once per reason (counts and ids only). */
  #waiting(request: DeletionRequest, reason: string): void {
    if (this.#waitReason.get(request.id) === reason) return;
    this.#waitReason.set(request.id, reason);
    this.#o.logger.info({ request_id: request.id, data_set_id: request.dataSetId, reason }, 'deletion request waiting');
  }

  /**
   * The sharded layout: holds the data set's parts at one queue position before the request looks
   * its target up (ViewEraser `hold`), renewing the claim while they come together.
   */
  async #hold(request: DeletionRequest, eraser: ViewEraser): Promise<void> {
    const started = Date.now();
    await eraser.hold?.(request.id, async () => {
      // Parts far apart (shards ahead of the identity part under a backlog) take a while: said once.
      if (Date.now() - started > HOLD_NOTICE_MS) this.#waiting(request, "the view's parts are being brought to one queue position (the consumer is catching up)");
      await this.#step(request);
      await new Promise((r) => setTimeout(r, HOLD_POLL_MS));
    });
  }

  /** Before each step: renew the claim, and wait while the data dir is nearly full. */
  async #step(request: DeletionRequest): Promise<void> {
    const min = this.#o.minFreeBytes ?? deletionMinFreeBytes();
    for (;;) {
      if (this.#stopping) throw new Stopping();
      if (!(await this.#b.store.claim(request.id, CLAIM_MS))) throw new ClaimLost();
      const free = await this.#b.freeBytes();
      if (free === null || free >= min) return;
      if (!this.#spaceWarnedFor.has(request.id)) {
        this.#spaceWarnedFor.add(request.id);
        this.#o.logger.warn(
          { request_id: request.id, free_bytes: free, min_free_bytes: min },
          'deletion request paused: too little free space on the data dir; it goes on by itself once space is freed (add disk or shorten retention; ECAPI_DELETION_MIN_FREE_MB)',
        );
      }
      await new Promise((r) => setTimeout(r, SPACE_WAIT_MS));
    }
  }

  async #carryOut(request: DeletionRequest): Promise<void> {
    const eraser = await this.#b.viewEraser(request.dataSetId);
    try {
      await this.#carryOutWith(request, eraser);
    } finally {
      // An attempt cut off keeps its fences for the next one, but nothing else of this process.
      await eraser?.detach?.();
    }
  }

  async #carryOutWith(request: DeletionRequest, eraser: ViewEraser | null): Promise<void> {
    const { dataSetId, id, boundSeq } = request;
    // Counts settled by an earlier attempt: its deletions are over, only the clean-up is left.
    let result = request.result;
    const before = eraser ? await eraser.tally(id) : zeroCounts();
    // Counts only. `resumed`: an earlier attempt (a worker that died) had deleted part of it.
    this.#o.logger.info(
      { request_id: id, data_set_id: dataSetId, kind: request.kind, resumed: result !== null || before.records + before.identities > 0 || (await this.#b.queue.tally(id)) > 0 },
      'deletion request started',
    );
    if (result === null) {
      await this.#step(request);
      let identifiers: string[] = [];
      let base: (event: Record<string, unknown>) => boolean;
      const roots: string[] = [];
      if (request.kind === 'delete_event') {
        const target = request.target!;
        if (eraser) {
          await this.#hold(request, eraser);
          await eraser.deleteRecord(id, dataSetId, recordKeyForId(target), boundSeq);
          await eraser.release?.();
        }
        await this.#b.store.noteDeletedEvents(dataSetId, [target], id); // `events get` says it was deleted
        base = (event) => event.id === target;
      } else {
        const target = request.target!;
        // The sharded layout holds its parts first: the identity is the one of the held view (a part
        // behind could still unite it with another), and with --suppress no part applies an event
        // under the new list that another part applied under the old one.
        if (eraser) await this.#hold(request, eraser);
        // An identifier is the person's however it was spelled or whichever field carried it, as the
        // suppression list compares it (identifier-digest.ts canonicalIdentifier): every identity
        // linked by a spelling of the target goes (equivalent-identifiers.ts).
        const found = new Map<string, IdentityToErase>();
        const lookups = request.kind === 'forget_identifier' ? equivalentIdentifiers(target).map((identifier) => ({ identifier })) : [{ identityKey: target }];
        for (const lookup of lookups) {
          const identity = (await eraser?.findIdentity(dataSetId, lookup)) ?? null;
          if (identity !== null && !found.has(identity.root)) found.set(identity.root, identity);
        }
        const identities = [...found.values()];
        identifiers = identities.length > 0 ? [...new Set(identities.flatMap((identity) => identity.identifiers))] : request.kind === 'forget_identifier' ? [target] : [];
        // --suppress: the person's identifiers are suppressed first, then their records go, all of
        // them: those of events sent after the request and applied before now included. None can be
        // added after: a consumer batch reads the list under the view's write lock, which the
        // deletions take too (view-consumer.ts), so a batch either committed before
        // the deletions (and is deleted) or applies under the new list (what is suppressed is dropped
        // before the view; the queued copies stay until queue retention). The wait is for consumers
        // of older versions, which looked at the list every SUPPRESSION_REFRESH_MS (mixed versions
        // during an upgrade).
        if (request.suppress && identifiers.length > 0) {
          await this.#b.store.suppress(dataSetId, await Promise.all(identifiers.map((i) => this.#b.store.digest(dataSetId, i))), request.id);
          await new Promise((r) => setTimeout(r, 2 * SUPPRESSION_REFRESH_MS));
        }
        const coveredUpTo = request.suppress ? Number.MAX_SAFE_INTEGER : boundSeq;
        for (const identity of eraser ? identities : []) {
          const root = identity.root;
          roots.push(root);
          const keys = new Set(identity.keys);
          let after: EraserCursor | null = 0;
          while (after !== null) {
            await this.#step(request);
            const step = await eraser!.deleteIdentityRecords(id, dataSetId, { root, keys }, coveredUpTo, after, SCAN_BATCH);
            await this.#b.store.noteDeletedEvents(dataSetId, step.deletedEventIds ?? [], id); // `events get` says it was deleted
            after = step.next;
            await yieldLoop();
          }
        }
        // The identity trees are deleted below, in their identity part alone: the consumers go on.
        await eraser?.release?.();
        const wanted = new Set(identifiers);
        // The queue: events carrying any of the identities' identifiers, or any spelling of the target.
        const canonicalTarget = request.kind === 'forget_identifier' ? canonicalIdentifier(target) : null;
        base = (event) => identifiersOf(normalizeEvent(event as never)).some((i) => wanted.has(i) || (canonicalTarget !== null && canonicalIdentifier(i) === canonicalTarget));
      }
      // The queue: the person's copies up to the bound, and the copies of every deleted record: its
      // id's up to the bound, and the re-sends merged into it after the bound (up to its last position).
      const tally = eraser ? await eraser.tally(id) : null;
      const erased = new Map<string, number>();
      for (const r of tally?.erased ?? []) erased.set(r.eventId, Math.max(erased.get(r.eventId) ?? 0, r.lastSeq));
      const match = (event: Record<string, unknown>, seq: number) => {
        const lastSeq = typeof event.id === 'string' ? erased.get(event.id) : undefined;
        return seq <= boundSeq ? lastSeq !== undefined || base(event) : lastSeq !== undefined && seq <= lastSeq;
      };
      if (request.kind !== 'forget_identity' || identifiers.length > 0 || erased.size > 0) {
        const upTo = Math.max(boundSeq, tally?.maxSeq ?? 0);
        let after: number | null = 0;
        while (after !== null) {
          await this.#step(request);
          after = (await this.#b.queue.erase(id, dataSetId, upTo, after, QUEUE_PAGE, match)).next;
          await yieldLoop();
        }
      }
      // Body-log bytes of rewritten segments: zeroed and synced before the request can be done.
      await this.#b.queue.overwritePending({ wait: true });
      // The identity tree last: a worker that takes over after this still finds it above.
      if (eraser) for (const root of roots) await eraser.deleteIdentity(id, dataSetId, root);
      const view: ErasedCounts = eraser ? await eraser.tally(id) : zeroCounts();
      result = {
        view_records: view.records,
        identities: view.identities,
        identifier_links: view.links,
        queue_events: await this.#b.queue.tally(id),
        suppressed_identifiers: request.suppress ? identifiers.length : 0,
      };
      await this.#b.store.settle(id, result);
    }
    await this.#finish(request, eraser, result);
  }

  /**
   * The tallies go, the old copies go (the pages' unallocated space zeroed, the WALs truncated: no old
   * page image left), then the request is done: the store clears the target, scrubs and truncates
   * lifecycle.db before it marks it done. Files that cannot be cleared yet (WalBusyError: a reader
   * holds an older snapshot) leave the request pending, logged as waiting with the reason; the round
   * goes on with the other requests and retention.
   */
  async #finish(request: DeletionRequest, eraser: ViewEraser | null, result: DeletionResult): Promise<void> {
    const { id, dataSetId } = request;
    if (eraser) await eraser.clearTally(id);
    await this.#b.queue.clearTally(id);
    if (eraser && !(await eraser.clearOldCopies())) throw new WalBusyError('the view files could not be cleared of old copies yet (busy, or the whole-file sweep ran past its time: fs/page-gap-scrub.ts); the request is finished at a later round');
    if (!(await this.#b.queue.clearOldCopies())) throw new WalBusyError('queue.db could not be cleared of old copies yet (busy, or the whole-file sweep ran past its time: fs/page-gap-scrub.ts); the request is finished at a later round');
    await this.#b.store.complete(id, result);
    this.#spaceWarnedFor.delete(id);
    this.#waitReason.delete(id);
    // Counts only: never the target, an identifier or a digest.
    this.#o.logger.info({ request_id: id, data_set_id: dataSetId, kind: request.kind, ...result }, 'deletion request done');
  }

  async #retention(nowMs: number): Promise<void> {
    const total: ErasedCounts = zeroCounts();
    // The longest write-lock hold of one transaction: what a consumer batch may have waited for.
    let longestMs = 0;
    let heldMs = 0;
    let transactions = 0;
    for (const dataSet of await this.#o.controlPlane.listDataSets()) {
      const eraser = await this.#b.viewEraser(dataSet.id);
      if (!eraser) return;
      // Once per process, every view store: a debt of a previous process (a deferred scrub, a worker
      // stopped within the interval) is not forgotten (fs/old-copies-schedule.ts starts owed).
      const scope = eraser.oldCopiesScope ?? eraser;
      if (!this.#scopesSeen.has(scope)) {
        this.#scopesSeen.add(scope);
        this.#scrubOwed.set(scope, eraser);
      }
      // Counted in the consumer's time (appliedThrough), with a margin for requests being committed.
      const cutoff = (await this.#b.appliedThrough(dataSet.id, nowMs)) - dataSet.policy.viewRetentionMs - RETENTION_COMMIT_MARGIN_MS;
      // The sharded layout holds its parts while it deletes, and only when there is something to delete.
      if (eraser.hasExpired && !(await eraser.hasExpired(dataSet.id, cutoff))) continue;
      if (eraser.hold) {
        let skip: 'stopping' | 'held' | null = null;
        await eraser
          .hold(0, async () => {
            if (this.#stopping) throw new Stopping();
            await new Promise((r) => setTimeout(r, HOLD_POLL_MS));
          })
          .catch((error: unknown) => {
            if (error instanceof Stopping) skip = 'stopping';
            else if (error instanceof PartsHeldError) skip = 'held';
            else throw error;
          });
        if (skip === 'held') continue; // a deletion request holds the parts: the next round
        if (skip === 'stopping') {
          await eraser.release?.();
          return;
        }
      }
      try {
        for (;;) {
          const counts = await eraser.expire(dataSet.id, cutoff, EXPIRE_BATCH);
          longestMs = Math.max(longestMs, counts.heldMs);
          heldMs += counts.heldMs;
          transactions++;
          addCounts(total, counts);
          if (counts.records > 0) {
            this.#walDirty.add(eraser);
            this.#scrubOwed.set(scope, eraser);
            this.#scrubs.deleted();
          }
          await yieldLoop();
          if (counts.records < EXPIRE_BATCH) break;
        }
      } finally {
        await eraser.release?.();
      }
    }
    if (total.records > 0) {
      this.#o.logger.info(
        {
          deleted_records: total.records,
          deleted_identities: total.identities,
          deleted_links: total.links,
          transactions,
          mean_transaction_ms: Math.round((heldMs / transactions) * 10) / 10,
          longest_transaction_ms: Math.round(longestMs * 10) / 10,
        },
        'view retention',
      );
    }
  }

}
