/**
 * Deletion requests reach the console's memory (live-store.ts): "a deletion leaves no byte behind"
 * holds for the admin process's memory too, not only for the files. That memory is the test
 * environment's list of events (`#testEvents`: payloads, ids) and, in both environments, each data
 * set's most recent rejections (`#rejections`: the rejected event's id, its index, the masked error).
 *
 * How the console learns of them. `events delete` and `identities forget` record a request in the
 * lifecycle store (lifecycle.db, or the environment's PostgreSQL tables) from the CLI, in another
 * process; no admin API is involved. So the process with the admin port follows the store: every
 * second, and before every read of the list or of a data set's rejections (the console API calls
 * `syncWithin`), it reads the requests recorded since it last looked (`after`), the pending ones (a
 * request that PostgreSQL committed after one with a higher id is still pending when it is first
 * seen) and, for a pending request it knows, whether it is done. Serving processes never read the
 * store for this: the request path stays as it is.
 *
 * A rejection is compared as an entry that shows an event id and nothing else: it holds no event
 * contents, so no identifier can match it; a masked id (an email address or phone number sent as
 * the id) goes with any request of its data set, as in the list.
 *
 * Which entries a request takes (all of its data set, received up to a time, see below):
 * - what the request names, from when it is recorded:
 *   - `events delete <id>`: the entries of that event id (accepted, rejected, or in the body of a
 *     request refused as a whole);
 *   - `identities forget --identifier`: the entries whose events carry the identifier in any
 *     spelling the suppression list would match (as the merged view types identifiers: email,
 *     phone, cid, uid, ifa), i.e. whose digest in canonical form equals the request's (a SHA-256 hex
 *     digest in any hashed field, a UUID however written; lifecycle/identifier-digest.ts, the same
 *     class as lifecycle/equivalent-identifiers.ts);
 * - what the worker resolved, once the request is done (`forget`, by identifier or identity key):
 *   the entries whose event id is among the records the worker deleted, which it notes as keyed
 *   digests (`deletedBy`): every record of the identity, also those linked to it through another
 *   identifier, which the list alone cannot tell.
 * - conservatively, what the list cannot compare, because the display masked it (event-display.ts)
 *   or does not hold it: an entry with a masked event id goes with any `events delete` of its data
 *   set; an entry with a masked value where the view reads identifiers (an `ifa`, a `uid` that is
 *   no digest, a rejected event's plain-text email), a member the schema does not know (in
 *   `user_data` or at the top of a rejected event), a masked id, or an event not kept (too large,
 *   a body that does not parse) goes with any `forget --identifier`; once a forget is done, an
 *   entry with no event id, or a masked one, goes too. A few entries too many may go; none the
 *   request covers stays. Other masked values (an IP address, a user agent) name no identity the
 *   view links and do not count.
 *
 * Matching uses the lifecycle store's keyed digests (`targetDigester`: the target digest each value
 * would have), never the request's target in clear: that is cleared when the request is done, and a
 * request may well be done before the list first sees it. The list keeps no identifier of its own
 * beyond what it displays; an entry's digests are computed once (a WeakMap that goes with it).
 *
 * Why not in the serving processes: the recorder masks and hands entries over once a second; the
 * comparisons run where the entries are kept, once a second and on reads.
 *
 * Received up to when: the request covers what was sent before it, so an entry goes when it was
 * received at or before the later of `requested_at` and the moment this process learned of the
 * request (a second or so later, and on another node's clock on PostgreSQL: the later time is the
 * conservative one); what the worker resolved, up to the later of `done_at` and when this process
 * saw it done. The store keeps each erasure a minute to drop entries a serving process reports late
 * (they report every second), and a horizon after that (live-store.ts).
 */
import type { Logger } from '../observability/logger.js';
import type { DeletionRequest, LifecycleBackend, TargetDigester } from '../lifecycle/lifecycle-backend.js';
import { identifiersOf, normalizeEvent } from '../merged-view/identity.js';
import type { JsonObject } from '../merged-view/merge.js';
import { isMaskedForDisplay, isUnknownFieldName } from './event-display.js';
import type { TestEventEntry } from './live-delta.js';
import { SharedNextRun } from '../model/shared-next-run.js';
import { ERASURE_MEMORY_MS, MAX_ERASURES, type ConsoleErasure, type ErasableEntry, type LiveStore } from './live-store.js';

const POLL_MS = 1_000;
/** Requests read per query while catching up. */
const PAGE = 100;
/** A failing read of the store is logged at most this often. */
const WARN_EVERY_MS = 60_000;

/** What an entry shows that a deletion can be compared with: computed once per entry. */
interface Shown {
  /** The event ids in clear of its events. */
  readonly ids: readonly string[];
  /** The identifiers its events carry, typed as the merged view links them (merged-view/identity.ts). */
  readonly identifiers: readonly string[];
  /** An event id masked for display, or an event the entry does not hold: no id comparison can clear it. */
  readonly opaqueId: boolean;
  /** A masked value or unknown member, or an event the entry does not hold: no identifier comparison can clear it. */
  readonly opaqueIdentifiers: boolean;
  /** An event without an id: no deleted record's id can be compared with it. */
  readonly idless: boolean;
}

const isObject = (value: unknown): value is JsonObject => value !== null && typeof value === 'object' && !Array.isArray(value);

const listOf = (value: unknown): unknown[] => (value === undefined || value === null ? [] : Array.isArray(value) ? value : [value]);

const masked = (value: unknown): boolean => typeof value === 'string' && isMaskedForDisplay(value);

/**
 * Whether a displayed event hides what an identifier comparison needs: a masked value where the
 * merged view reads identifiers (customer_identifier, email_address, phone_numbers, uids[].id, ifa:
 * merged-view/identity.ts), a `user_data` masked whole, or a member the schema does not know in
 * `user_data` or at the top (a rejected event's identifiers sent under a wrong name). Other masked
 * values of `user_data` (an IP address, a user agent, a city) are no identifier the view links.
 */
function hidesIdentifiers(event: JsonObject): boolean {
  if (Object.keys(event).some(isUnknownFieldName)) return true;
  const ud = event.user_data;
  if (ud === undefined || ud === null) return false;
  if (!isObject(ud)) return true;
  if (Object.keys(ud).some(isUnknownFieldName)) return true;
  const uids = listOf(ud.uids);
  if (uids.some((u) => !isObject(u) || masked(u.id) || Object.keys(u).some(isUnknownFieldName))) return true;
  return [ud.customer_identifier, ...listOf(ud.email_address), ...listOf(ud.phone_numbers), ud.ifa].some(masked);
}

/** The identifiers of a displayed event as the merged view types them; null when it cannot be read (a rejected event of any shape). */
function identifiersIn(event: JsonObject): string[] | null {
  try {
    return identifiersOf(normalizeEvent(event));
  } catch {
    return null;
  }
}

/** The events an entry holds for display (one for a per-event outcome; the body's for a request refused as a whole; a rejection's id alone). */
function shownOf(entry: ErasableEntry): Shown {
  if (!('outcome' in entry)) {
    const id = entry.event_id;
    const opaque = id !== null && isMaskedForDisplay(id);
    // No id (a rejection for a missing id) is not `idless`: the entry holds nothing else, so nothing of a person.
    return { ids: id === null || opaque ? [] : [id], identifiers: [], opaqueId: opaque, opaqueIdentifiers: opaque, idless: false };
  }
  const ids: string[] = [];
  const identifiers: string[] = [];
  let opaqueId = false;
  let opaqueIdentifiers = false;
  let idless = false;
  const add = (id: unknown, event: unknown) => {
    if (typeof id !== 'string') idless = true;
    else if (isMaskedForDisplay(id)) opaqueId = true;
    else ids.push(id);
    const found = isObject(event) ? identifiersIn(event) : null;
    if (found === null || hidesIdentifiers(event as JsonObject)) opaqueIdentifiers = true;
    if (found !== null) identifiers.push(...found);
  };
  if (entry.outcome === 'failed') {
    if (entry.body_omitted !== undefined) {
      opaqueId = true;
      opaqueIdentifiers = true;
    }
    const events = isObject(entry.body) && Array.isArray(entry.body.events) ? entry.body.events : [];
    for (const event of events) {
      // A string stands for an event too large to keep (request-failure.ts).
      if (isObject(event)) add(event.id, event);
      else {
        opaqueId = true;
        opaqueIdentifiers = true;
      }
    }
  } else {
    add(entry.event_id, entry.event);
  }
  // A masked id was masked because it names a person (an email address, a phone number, or a
  // value of its user_data): an identifier comparison cannot clear it either.
  if (opaqueId) opaqueIdentifiers = true;
  return { ids, identifiers, opaqueId, opaqueIdentifiers, idless };
}

/** An entry's shown parts and their digests under the store's key, computed on first use. */
interface Compared {
  readonly shown: Shown;
  ids?: ReadonlySet<string>;
  identifiers?: ReadonlySet<string>;
}

/** A forget's erasure once done: the ids the worker deleted, learned entry by entry (deletedBy). */
interface DeletedErasure extends ConsoleErasure {
  /** Digests of the ids looked up, and of those the store says were deleted. */
  readonly checked: Set<string>;
  readonly deleted: Set<string>;
}

export class ConsoleDeletions {
  readonly #live: LiveStore;
  readonly #backend: LifecycleBackend;
  readonly #logger: Logger | undefined;
  readonly #compared = new WeakMap<ErasableEntry, Compared>();
  #digest: TargetDigester | null = null;
  /** The highest request id read; null until the first read (requests before the start are not ours). */
  #lastId: number | null = null;
  /** Requests seen pending (their kind: never the target), by id: watched until done. */
  readonly #pending = new Map<number, DeletionRequest['kind']>();
  /** Erasures applied, re-applied at every sync until their memory ends (the store keeps as long). */
  readonly #active = new Map<ConsoleErasure, number>();
  readonly #deleted: DeletedErasure[] = [];
  /** The reads of the store: one at a time, each shared by the callers that asked before it started. */
  readonly #reads = new SharedNextRun(() => this.#read(Date.now()));
  #timer: NodeJS.Timeout | null = null;
  #warnedAt = Number.NEGATIVE_INFINITY;

  constructor(live: LiveStore, backend: LifecycleBackend, logger?: Logger) {
    this.#live = live;
    this.#backend = backend;
    this.#logger = logger;
  }

  start(): void {
    const run = () =>
      void this.sync().catch((error: Error) => {
        const now = Date.now();
        if (now - this.#warnedAt < WARN_EVERY_MS) return;
        this.#warnedAt = now;
        this.#logger?.warn({ err: { message: error.message } }, 'console: deletion requests could not be read; retrying every second');
      });
    run();
    this.#timer = setInterval(run, POLL_MS);
    this.#timer.unref();
  }

  /** Stops following the store; resolves once a read under way has ended. */
  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.#reads.settled();
  }

  /**
   * Brings the list up to every request recorded before this call: one read at a time, and callers
   * that arrive while one waits to start share it (it starts after they called).
   */
  sync(): Promise<void> {
    return this.#reads.run();
  }

  /**
   * `sync`, waited for at most `ms` (never rejects): what a read of the list does, so that a store
   * that is slow or down delays the console by that much at most (the loop retries and logs).
   */
  async syncWithin(ms: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.sync().catch(() => undefined), new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
    clearTimeout(timer);
  }

  async #read(nowMs: number): Promise<void> {
    const store = this.#backend.store;
    this.#digest ??= await store.targetDigester();
    if (this.#lastId === null) this.#lastId = (await store.audit(undefined, 1))[0]?.id ?? 0;
    // Each page is learned before the next is read: a read that fails midway loses nothing.
    const seen = new Set<number>();
    for (;;) {
      const page = await store.after(this.#lastId, PAGE);
      for (const r of page) {
        this.#learn(r, nowMs);
        seen.add(r.id);
        this.#lastId = r.id;
      }
      if (page.length < PAGE) break;
    }
    const pending = await store.pending();
    const pendingIds = new Set(pending.map((r) => r.id));
    for (const r of pending) if (!this.#pending.has(r.id) && !seen.has(r.id)) this.#learn(r, nowMs);
    // Known pending requests no longer pending: done (or gone with a restored data dir).
    for (const [id, kind] of this.#pending) {
      if (pendingIds.has(id)) continue;
      const now = await store.get(id);
      this.#pending.delete(id);
      if (now?.state === 'done' && kind !== 'delete_event') this.#resolve(now, nowMs);
    }
    await this.#lookUpDeleted();
    for (const [erasure, until] of this.#active) if (until < nowMs) this.#active.delete(erasure);
    while (this.#active.size > MAX_ERASURES) this.#active.delete(this.#active.keys().next().value!);
    for (let i = this.#deleted.length - 1; i >= 0; i--) if (!this.#active.has(this.#deleted[i]!)) this.#deleted.splice(i, 1);
    this.#live.erase([...this.#active.keys()], nowMs);
  }

  /** A request seen for the first time: what it names goes now; a forget's resolution once done. */
  #learn(r: DeletionRequest, nowMs: number): void {
    // The closures keep the digest, never the request (a pending one holds its target in clear).
    const { dataSetId, kind, targetDigest } = r;
    const throughMs = Math.max(r.requestedAt, nowMs);
    if (kind === 'delete_event') {
      this.#activate({ dataSetId, throughMs, covers: (entry) => this.#shown(entry).opaqueId || this.#idDigests(entry).has(targetDigest) }, nowMs);
    } else if (kind === 'forget_identifier') {
      this.#activate({ dataSetId, throughMs, covers: (entry) => this.#shown(entry).opaqueIdentifiers || this.#identifierDigests(entry).has(targetDigest) }, nowMs);
    }
    // An identity key names nothing an entry shows: only what the worker deletes (#resolve).
    if (r.state === 'pending') this.#pending.set(r.id, kind);
    else if (kind !== 'delete_event') this.#resolve(r, nowMs);
  }

  /** A forget that is done: the entries of the records it deleted go (looked up by #lookUpDeleted). */
  #resolve(r: DeletionRequest, nowMs: number): void {
    const checked = new Set<string>();
    const deleted = new Set<string>();
    const erasure: DeletedErasure = {
      dataSetId: r.dataSetId,
      throughMs: Math.max(r.doneAt ?? nowMs, nowMs),
      checked,
      deleted,
      covers: (entry) => {
        const shown = this.#shown(entry);
        if (shown.opaqueId || shown.idless) return true;
        for (const d of this.#idDigests(entry)) if (deleted.has(d)) return true;
        return false;
      },
    };
    this.#deleted.push(erasure);
    this.#activate(erasure, nowMs);
  }

  /** Asks the store, once per event id, whether a done forget deleted its record: the ids of entries not asked about yet. */
  async #lookUpDeleted(): Promise<void> {
    const store = this.#backend.store;
    for (const erasure of this.#deleted) {
      for (const entry of this.#live.entriesOf(erasure.dataSetId)) {
        if (entry.at > erasure.throughMs) continue;
        const { ids } = this.#shown(entry);
        for (const id of ids) {
          const digest = this.#digest!(erasure.dataSetId, 'delete_event', id);
          if (erasure.checked.has(digest)) continue;
          // Deleted by this request or an earlier one (the store notes an id's first deletion only):
          // either way its record is gone, and the entry with it.
          if ((await store.deletedBy(erasure.dataSetId, id)) !== null) erasure.deleted.add(digest);
          erasure.checked.add(digest);
        }
      }
    }
  }

  #activate(erasure: ConsoleErasure, nowMs: number): void {
    this.#active.set(erasure, Math.max(erasure.throughMs, nowMs) + ERASURE_MEMORY_MS);
  }

  #compare(entry: ErasableEntry): Compared {
    let compared = this.#compared.get(entry);
    if (!compared) this.#compared.set(entry, (compared = { shown: shownOf(entry) }));
    return compared;
  }

  #shown(entry: ErasableEntry): Shown {
    return this.#compare(entry).shown;
  }

  /** The entry's event ids as `events delete` digests them. */
  #idDigests(entry: ErasableEntry): ReadonlySet<string> {
    const compared = this.#compare(entry);
    const dataSetId = entry.data_set_id ?? '';
    return (compared.ids ??= new Set(compared.shown.ids.map((id) => this.#digest!(dataSetId, 'delete_event', id))));
  }

  /** The entry's identifiers as `identities forget --identifier` digests them (canonical form: every equivalent spelling alike). */
  #identifierDigests(entry: ErasableEntry): ReadonlySet<string> {
    const compared = this.#compare(entry);
    const dataSetId = entry.data_set_id ?? '';
    return (compared.identifiers ??= new Set(compared.shown.identifiers.map((identifier) => this.#digest!(dataSetId, 'forget_identifier', identifier))));
  }
}
