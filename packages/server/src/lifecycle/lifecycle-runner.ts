/**
 * The worker's data lifecycle (embedded profile): retention of the merged view and deletion
 * requests (`identities forget`, `events delete`), run in the worker process next to the consumer,
 * in small transactions with the event loop yielded between them (sqlite-view-eraser.ts says why
 * that is safe next to the partition threads).
 *
 * A deletion request waits until the consumer has applied the queue up to the request's bound (the
 * queue's last sequence number when it was made); then every copy of the person's data that existed
 * at request time is in the view, where it is deleted, and in the queue, where it is erased
 * (sqlite-queue-eraser.ts). Suppressed identifiers are added before that wait, so records the
 * consumer applies meanwhile are already dropped (view-applier.ts `suppressed`).
 *
 * Retention: every `everyMs`, per data set, records last updated before now - viewRetentionMs are
 * deleted, EXPIRE_BATCH per transaction, with their identities once those have no record left.
 */
import { setImmediate as yieldLoop } from 'node:timers/promises';
import type { ControlPlane } from '../control/control-plane.js';
import { identifiersOf, normalizeEvent } from '../merged-view/identity.js';
import { recordKeyForId } from '../merged-view/merge.js';
import type { Logger } from '../observability/logger.js';
import { addCounts, zeroCounts, type DeletionRequest, type DeletionResult, type ErasedCounts, type LifecycleBackend, SUPPRESSION_REFRESH_MS } from './lifecycle-backend.js';

/** Records per retention transaction: about 2 ms of the view file's write lock (bench/README.md "Data lifecycle"). */
export const EXPIRE_BATCH = 100;
const SCAN_BATCH = 2000;
/** How long a worker holds a request it carries out before another may take it over (its deletes are idempotent). */
const CLAIM_MS = 5 * 60_000;
const QUEUE_PAGE = 50;

export interface LifecycleRunnerOptions {
  readonly backend: LifecycleBackend;
  readonly controlPlane: ControlPlane;
  readonly logger: Logger;
  /** How often view retention runs (default one minute). */
  readonly retentionEveryMs?: number;
}

export class LifecycleRunner {
  readonly #o: LifecycleRunnerOptions;
  readonly #b: LifecycleBackend;
  #lastRetention = Number.NEGATIVE_INFINITY;

  constructor(options: LifecycleRunnerOptions) {
    this.#o = options;
    this.#b = options.backend;
  }

  /** One round: due body-log overwrites, pending requests the consumer has caught up with, retention when due. */
  async tick(nowMs = Date.now()): Promise<void> {
    await this.#b.queue.overwritePending();
    for (const request of await this.#b.store.pending()) {
      if (request.suppress) await this.#suppressEarly(request);
      if (!(await this.#b.applied(request.dataSetId, request.boundSeq))) continue; // not everything it must delete is in the view yet
      if (!(await this.#b.store.claim(request.id, CLAIM_MS))) continue; // another worker carries it out
      await this.#carryOut(request);
    }
    if (nowMs - this.#lastRetention >= (this.#o.retentionEveryMs ?? 60_000)) {
      this.#lastRetention = nowMs;
      await this.#retention(nowMs);
    }
  }

  /** Until stopped: a tick a second (errors logged, the next tick tries again). */
  async run(stopped: Promise<void>, everyMs = 1000): Promise<void> {
    let stop = false;
    void stopped.then(() => (stop = true));
    while (!stop) {
      await this.tick().catch((error: Error) => this.#o.logger.error({ err: { message: error.message } }, 'data lifecycle round failed'));
      await Promise.race([stopped, new Promise((r) => setTimeout(r, everyMs).unref())]);
    }
  }

  /** The requested identifier is suppressed at once (its identity's other identifiers once resolved). */
  async #suppressEarly(request: DeletionRequest): Promise<void> {
    if (request.kind === 'forget_identifier' && request.target !== null) await this.#b.store.suppress(request.dataSetId, [request.targetDigest], request.id);
  }

  async #carryOut(request: DeletionRequest): Promise<void> {
    const { dataSetId } = request;
    const eraser = await this.#b.viewEraser(dataSetId);
    const view = zeroCounts();
    let identifiers: string[] = [];
    let match: (event: Record<string, unknown>) => boolean;
    if (request.kind === 'delete_event') {
      const id = request.target!;
      if (eraser) addCounts(view, await eraser.deleteRecord(dataSetId, recordKeyForId(id)));
      await this.#b.store.noteDeletedEvents(dataSetId, [id], request.id); // `events get` says it was deleted
      match = (event) => event.id === id;
    } else {
      const target = request.target!;
      const identity = (await eraser?.findIdentity(dataSetId, request.kind === 'forget_identifier' ? { identifier: target } : { identityKey: target })) ?? null;
      identifiers = identity ? identity.identifiers : request.kind === 'forget_identifier' ? [target] : [];
      if (identity && eraser) {
        const keys = new Set(identity.keys);
        let after: number | null = 0;
        while (after !== null) {
          const step = await eraser.deleteIdentityRecords(dataSetId, keys, after, SCAN_BATCH);
          addCounts(view, step.counts);
          await this.#b.store.noteDeletedEvents(dataSetId, step.deletedEventIds ?? [], request.id);
          after = step.next;
          await yieldLoop();
        }
        addCounts(view, await eraser.deleteIdentity(dataSetId, identity.root));
      }
      const wanted = new Set(identifiers);
      match = (event) => identifiersOf(normalizeEvent(event as never)).some((i) => wanted.has(i));
    }
    let queueEvents = 0;
    if (request.kind !== 'forget_identity' || identifiers.length > 0) {
      let after: number | null = 0;
      while (after !== null) {
        const step = await this.#b.queue.erase(dataSetId, request.boundSeq, after, QUEUE_PAGE, match);
        queueEvents += step.events;
        after = step.next;
        await yieldLoop();
      }
    }
    if (request.suppress && identifiers.length > 0) {
      await this.#b.store.suppress(dataSetId, await Promise.all(identifiers.map((i) => this.#b.store.digest(dataSetId, i))), request.id);
      // Done only once every consumer has looked for the new list (SUPPRESSION_REFRESH_MS).
      await new Promise((r) => setTimeout(r, 2 * SUPPRESSION_REFRESH_MS));
    }
    const result: DeletionResult = {
      view_records: view.records,
      identities: view.identities,
      identifier_links: view.links,
      queue_events: queueEvents,
      suppressed_identifiers: request.suppress ? identifiers.length : 0,
    };
    await this.#b.store.complete(request.id, result);
    // Counts only: never the target, an identifier or a digest.
    this.#o.logger.info({ request_id: request.id, data_set_id: dataSetId, kind: request.kind, ...result }, 'deletion request done');
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
      const cutoff = nowMs - dataSet.policy.viewRetentionMs;
      for (;;) {
        const counts = await eraser.expire(dataSet.id, cutoff, EXPIRE_BATCH);
        longestMs = Math.max(longestMs, counts.heldMs);
        heldMs += counts.heldMs;
        transactions++;
        addCounts(total, counts);
        await yieldLoop();
        if (counts.records < EXPIRE_BATCH) break;
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
