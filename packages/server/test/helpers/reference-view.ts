/**
 * A naive, record-at-a-time reference of the rules of docs/guides/merged-view.md for the merged view ("Merge rule",
 * "Merge window", "Identity linking", "Analytics"), for model-based tests of the batch applier.
 * Deliberately written another way than the consumer: no batches, no store, identities as plain
 * maps re-scanned on every union, and analytics computed at the end from the final records
 * (declarative) rather than as deltas. It reuses only the pure per-event functions (normalization,
 * merge of two events, identifiers, one record's contribution), which have their own tests.
 */
import { hourOf } from '../../src/model/hourly-counters.js';
import { contributionOf, isMeasurementOnly } from '../../src/merged-view/record-counters.js';
import { identifiersOf, normalizeEvent } from '../../src/merged-view/identity.js';
import { mergeEvents, recordKeyOf, type JsonObject } from '../../src/merged-view/merge.js';
import type { QueueRecord } from '../../src/queue/event-queue.js';
import type { ViewStore } from '../../src/merged-view/view-store.js';
import assert from 'node:assert/strict';

export interface ReferenceRecord {
  dataSetId: string;
  recordKey: string;
  firstSeq: number;
  lastSeq: number;
  firstReceivedAt: number;
  lastReceivedAt: number;
  mergedCount: number;
  /** Live identity (resolved), or null. */
  identity: string | null;
  measurementOnly: boolean;
  event: JsonObject;
}

export interface ReferenceIdentity {
  identityKey: string;
  eventCount: number;
  identifiers: string[];
  absorbedKeys: string[];
}

export class ReferenceView {
  readonly records = new Map<string, ReferenceRecord>();
  /** Per data set: identifier → the key it was first linked to. */
  readonly #links = new Map<string, Map<string, string>>();
  /** Per data set: every identity key ever created → its root (itself while live). */
  readonly #rootOf = new Map<string, Map<string, string>>();
  readonly #createdSeq = new Map<string, number>();
  /** (data set, hour of arrival, name) → count, for received / merged / discarded. */
  readonly #arrivals = new Map<string, number>();

  constructor(private readonly windowMs: (dataSetId: string) => number) {}

  #ds<T>(map: Map<string, Map<string, T>>, dataSetId: string): Map<string, T> {
    let m = map.get(dataSetId);
    if (!m) map.set(dataSetId, (m = new Map()));
    return m;
  }

  #countArrival(dataSetId: string, receivedAt: number, name: string): void {
    const k = `${dataSetId}\u0000${hourOf(receivedAt)}\u0000${name}`;
    this.#arrivals.set(k, (this.#arrivals.get(k) ?? 0) + 1);
  }

  apply(record: QueueRecord): void {
    const dataSetId = record.data_set_id;
    const event = normalizeEvent(record.event);
    const recordKey = recordKeyOf(event, record.seq);
    const k = `${dataSetId}\u0000${recordKey}`;
    const old = this.records.get(k);
    this.#countArrival(dataSetId, record.received_at, 'received');
    // The window the re-send was accepted under (queued with it), else the data set's (records queued before queues kept it).
    if (old && record.received_at - old.firstReceivedAt > (record.merge_window_ms ?? this.windowMs(dataSetId))) {
      this.#countArrival(dataSetId, record.received_at, 'discarded');
      return;
    }
    if (old) this.#countArrival(dataSetId, record.received_at, 'merged');
    const merged = old ? mergeEvents(old.event, event) : event;
    const next: ReferenceRecord = {
      dataSetId,
      recordKey,
      firstSeq: old ? old.firstSeq : record.seq,
      lastSeq: record.seq,
      firstReceivedAt: old ? Math.min(old.firstReceivedAt, record.received_at) : record.received_at,
      lastReceivedAt: old ? Math.max(old.lastReceivedAt, record.received_at) : record.received_at,
      mergedCount: (old?.mergedCount ?? 0) + 1,
      identity: old?.identity ?? null,
      measurementOnly: (old?.measurementOnly ?? false) || isMeasurementOnly(record.event, record.meta),
      event: merged,
    };
    this.records.set(k, next);

    // Identity: the live identities of the merged event's identifiers and of the record's previous one.
    const links = this.#ds(this.#links, dataSetId);
    const rootOf = this.#ds(this.#rootOf, dataSetId);
    const identifiers = identifiersOf(merged);
    const live = new Set<string>();
    if (next.identity !== null) live.add(rootOf.get(next.identity)!);
    for (const id of identifiers) if (links.has(id)) live.add(rootOf.get(links.get(id)!)!);
    if (live.size === 0 && identifiers.length === 0) return;
    let survivor: string;
    if (live.size === 0) {
      survivor = `ik_${record.seq}`;
      rootOf.set(survivor, survivor);
      this.#createdSeq.set(`${dataSetId}\u0000${survivor}`, record.seq);
    } else {
      const created = (key: string) => this.#createdSeq.get(`${dataSetId}\u0000${key}`)!;
      [survivor] = [...live].sort((a, b) => created(a) - created(b) || (a < b ? -1 : 1)) as [string];
      // Absorb: every key whose root is an absorbed identity now has the survivor as root.
      for (const [key, root] of rootOf) if (live.has(root)) rootOf.set(key, survivor);
    }
    for (const id of identifiers) if (!links.has(id)) links.set(id, survivor);
    // Records keep the key they were last written with; resolve everything through rootOf.
    next.identity = survivor;
  }

  /** The record with its identity resolved to the live one. */
  record(dataSetId: string, recordKey: string): ReferenceRecord | undefined {
    const r = this.records.get(`${dataSetId}\u0000${recordKey}`);
    if (!r) return undefined;
    return { ...r, identity: r.identity === null ? null : this.#rootOf.get(dataSetId)!.get(r.identity)! };
  }

  /** Every identity key ever created in a data set, with what `identities get` must answer for it. */
  identities(dataSetId: string): Map<string, ReferenceIdentity> {
    const rootOf = this.#rootOf.get(dataSetId) ?? new Map<string, string>();
    const links = this.#links.get(dataSetId) ?? new Map<string, string>();
    const out = new Map<string, ReferenceIdentity>();
    for (const [key, root] of rootOf) {
      const eventCount = [...this.records.values()].filter((r) => r.dataSetId === dataSetId && r.identity !== null && rootOf.get(r.identity) === root).length;
      const identifiers = [...links].filter(([, k]) => rootOf.get(k) === root).map(([id]) => id).sort();
      const absorbedKeys = [...rootOf].filter(([k, r]) => r === root && k !== root).map(([k]) => k).sort();
      out.set(key, { identityKey: root, eventCount, identifiers, absorbedKeys });
    }
    return out;
  }

  /** All non-zero counters of a data set, `hour\u0000name` → n, computed from the final records. */
  counters(dataSetId: string): Map<string, number> {
    const out = new Map<string, number>();
    const add = (hour: number, name: string, n: number) => {
      const k = `${hour}\u0000${name}`;
      out.set(k, (out.get(k) ?? 0) + n);
    };
    for (const r of this.records.values()) {
      if (r.dataSetId !== dataSetId) continue;
      for (const [name, n] of contributionOf(r.event, r.measurementOnly)) add(hourOf(r.firstReceivedAt), name, n);
    }
    for (const [k, n] of this.#arrivals) {
      const [ds, hour, name] = k.split('\u0000') as [string, string, string];
      if (ds === dataSetId) add(Number(hour), name, n);
    }
    for (const [k, n] of out) if (n === 0) out.delete(k);
    return out;
  }
}

/**
 * `store` read through its API equals `reference` for `dataSets`: the export (records in order of
 * first arrival), every record with its identity resolved, every identity the reference ever
 * created, and the counters; `more`: a store's own checks per data set (given the reference's
 * identities). `what` prefixes the messages.
 */
export async function assertViewMatches(
  store: ViewStore,
  reference: ReferenceView,
  dataSets: readonly string[],
  what = '',
  more?: (dataSetId: string, identities: Map<string, ReferenceIdentity>) => Promise<void>,
): Promise<void> {
  const at = (s: string) => (what ? `${what}: ${s}` : s);
  let exported = 0;
  for (const dataSetId of dataSets) {
    const seen: string[] = [];
    await store.exportRecords(dataSetId, 0, (page) => {
      for (const r of page) seen.push(r.recordKey);
    });
    exported += seen.length;
    const expectedKeys = [...reference.records.values()].filter((r) => r.dataSetId === dataSetId).sort((a, b) => a.firstSeq - b.firstSeq).map((r) => r.recordKey);
    assert.deepEqual(seen, expectedKeys, at(`${dataSetId}: export in order of first arrival`));
    for (const key of expectedKeys) {
      const want = reference.record(dataSetId, key)!;
      const got = (await store.getRecord(dataSetId, key))!;
      const resolved = got.identityKey === null ? null : await store.resolveIdentity(dataSetId, got.identityKey);
      assert.deepEqual(
        { ...got, identityKey: resolved },
        {
          dataSetId, recordKey: key, eventId: key.startsWith('id:') ? key.slice(3) : null, firstSeq: want.firstSeq, lastSeq: want.lastSeq,
          firstReceivedAt: want.firstReceivedAt, lastReceivedAt: want.lastReceivedAt, mergedCount: want.mergedCount,
          identityKey: want.identity, measurementOnly: want.measurementOnly, event: want.event,
        },
        at(`${dataSetId} ${key}`),
      );
    }
    // Identities: every key ever created answers like the reference.
    const identities = reference.identities(dataSetId);
    for (const [key, want] of identities) {
      const got = await store.getIdentity(dataSetId, key);
      assert.ok(got, at(`${dataSetId} identity ${key}`));
      assert.deepEqual(
        { identityKey: got.identityKey, eventCount: got.eventCount, identifiers: got.identifiers, absorbedKeys: [...got.absorbedKeys].sort() },
        want,
        at(`${dataSetId} identity ${key}`),
      );
    }
    await more?.(dataSetId, identities);
    const counters = new Map((await store.counters(dataSetId, 0)).map((c) => [`${c.hour}\u0000${c.name}`, c.n]));
    assert.deepEqual(counters, reference.counters(dataSetId), at(`${dataSetId} counters`));
  }
  assert.equal(exported, reference.records.size, at('records'));
}
