/**
 * Applies a batch of queue records to the merged view, identities and view counters, inside one
 * view transaction. Store-agnostic: it bulk-loads what the batch touches, computes the new state in
 * memory record by record (in queue order, exactly as if each record were its own batch), and
 * bulk-writes the result.
 *
 * Determinism: nothing here reads the clock. Times come from the records' received_at, identity
 * keys from queue positions, so the same queue always yields the same view, however the records
 * were split into batches and however often a batch was interrupted and applied again.
 *
 * Per record:
 * 1. normalize identity fields; key = (data_set_id, id), or the queue position without an id;
 * 2. an existing record whose first_received_at is more than the data set's merge window before
 *    this record's received_at: discard the arrival, count it (`discarded`);
 * 3. otherwise merge (merge.ts) into the existing record, or create it;
 * 4. identity: the identities of the record's identifiers and its previous identity are united; the
 *    oldest (created by the earliest queue position) survives, the others point to it; identifiers
 *    not yet known link to the survivor; a record without identifiers has no identity;
 * 5. counters: the record's previous contribution is subtracted and its new one added.
 */
import { addCounter, contributionOf, hourOf, isMeasurementOnly } from '../analytics/hourly.js';
import { identifiersOf, normalizeEvent } from '../merged-view/identity.js';
import { mergeEvents, recordKeyOf, type JsonObject } from '../merged-view/merge.js';
import {
  pairKey,
  type DataSetCounterDelta,
  type IdentifierLink,
  type IdentityNode,
  type MergedRecord,
  type ViewTransaction,
} from '../merged-view/view-store.js';
import type { QueueRecord } from '../queue/event-queue.js';

export interface ApplyOptions {
  /** Record update window of a data set, in milliseconds. */
  mergeWindowMs(dataSetId: string): number;
}

export interface BatchResult {
  readonly records: number;
  readonly created: number;
  readonly merged: number;
  readonly discarded: number;
}

/** Identity key of an identity created by the record at queue position `seq`. */
export const identityKeyFor = (seq: number) => `ik_${seq}`;

interface Prepared {
  readonly record: QueueRecord;
  readonly event: JsonObject;
  readonly key: string;
  readonly identifiers: string[];
  readonly measurementOnly: boolean;
}

type MutableNode = { -readonly [K in keyof IdentityNode]: IdentityNode[K] };

export async function applyRecords(tx: ViewTransaction, records: readonly QueueRecord[], options: ApplyOptions): Promise<BatchResult> {
  const prepared: Prepared[] = records.map((record) => {
    const event = normalizeEvent(record.event);
    return {
      record,
      event,
      key: recordKeyOf(event, record.seq),
      identifiers: identifiersOf(event),
      measurementOnly: isMeasurementOnly(record.event, record.meta),
    };
  });

  // Bulk loads: records, identifier links, identity nodes and (trees are flat) their roots.
  const refs = new Map<string, { dataSetId: string; recordKey: string }>();
  const idPairs = new Map<string, { dataSetId: string; identifier: string }>();
  for (const p of prepared) {
    refs.set(pairKey(p.record.data_set_id, p.key), { dataSetId: p.record.data_set_id, recordKey: p.key });
    for (const identifier of p.identifiers) idPairs.set(pairKey(p.record.data_set_id, identifier), { dataSetId: p.record.data_set_id, identifier });
  }
  const stored = await tx.loadRecords([...refs.values()]);
  // A merged event also carries the stored record's identifiers: their links are needed too.
  for (const record of stored.values()) {
    for (const identifier of identifiersOf(record.event)) idPairs.set(pairKey(record.dataSetId, identifier), { dataSetId: record.dataSetId, identifier });
  }
  const links = await tx.loadIdentifierLinks([...idPairs.values()]);
  const nodeRefs = new Map<string, { dataSetId: string; identityKey: string }>();
  for (const [pk, key] of links) {
    const dataSetId = idPairs.get(pk)!.dataSetId;
    nodeRefs.set(pairKey(dataSetId, key), { dataSetId, identityKey: key });
  }
  for (const record of stored.values()) {
    if (record.identityKey !== null) nodeRefs.set(pairKey(record.dataSetId, record.identityKey), { dataSetId: record.dataSetId, identityKey: record.identityKey });
  }
  const nodes = new Map<string, MutableNode>();
  for (const [pk, node] of await tx.loadIdentities([...nodeRefs.values()])) nodes.set(pk, { ...node });
  const parents = new Map<string, { dataSetId: string; identityKey: string }>();
  for (const node of nodes.values()) {
    if (node.parent !== null && !nodes.has(pairKey(node.dataSetId, node.parent))) {
      parents.set(pairKey(node.dataSetId, node.parent), { dataSetId: node.dataSetId, identityKey: node.parent });
    }
  }
  if (parents.size > 0) for (const [pk, node] of await tx.loadIdentities([...parents.values()])) nodes.set(pk, { ...node });

  const records$ = new Map<string, MergedRecord>(stored);
  const dirtyRecords = new Set<string>();
  const dirtyNodes = new Set<string>();
  const newLinks: IdentifierLink[] = [];
  const moves: { dataSetId: string; from: string; to: string }[] = [];
  const counters = new Map<string, number>();
  const count = (dataSetId: string, hour: number, name: string, delta: number) =>
    addCounter(counters, `${dataSetId}\u0000${hour}\u0000${name}`, delta);
  const addContribution = (dataSetId: string, hour: number, event: JsonObject, mmt: boolean, sign: 1 | -1) => {
    for (const [name, n] of contributionOf(event, mmt)) count(dataSetId, hour, name, sign * n);
  };

  // Loaded nodes by their parent, so that a union re-points the absorbed identity's members at once.
  const children = new Map<string, MutableNode[]>();
  const childrenOf = (dataSetId: string, key: string): MutableNode[] => {
    const pk = pairKey(dataSetId, key);
    let list = children.get(pk);
    if (!list) children.set(pk, (list = []));
    return list;
  };
  for (const node of nodes.values()) if (node.parent !== null) childrenOf(node.dataSetId, node.parent).push(node);

  const nodeOf = (dataSetId: string, key: string, seq: number): MutableNode => {
    const pk = pairKey(dataSetId, key);
    let node = nodes.get(pk);
    if (!node) {
      // A link or record pointing to a node that does not exist would be a damaged store; treat
      // the key as a root of its own rather than stop the consumer.
      node = { dataSetId, identityKey: key, parent: null, createdSeq: seq, eventCount: 0, identifierCount: 0 };
      nodes.set(pk, node);
      dirtyNodes.add(pk);
    }
    return node;
  };
  const find = (dataSetId: string, key: string, seq: number): MutableNode => {
    let node = nodeOf(dataSetId, key, seq);
    while (node.parent !== null) node = nodeOf(dataSetId, node.parent, seq);
    return node;
  };

  let created = 0;
  let merged = 0;
  let discarded = 0;
  for (const p of prepared) {
    const { record } = p;
    const dataSetId = record.data_set_id;
    const rk = pairKey(dataSetId, p.key);
    const existing = records$.get(rk);
    const arrivalHour = hourOf(record.received_at);
    count(dataSetId, arrivalHour, 'received', 1);

    if (existing && record.received_at - existing.firstReceivedAt > options.mergeWindowMs(dataSetId)) {
      count(dataSetId, arrivalHour, 'discarded', 1);
      discarded++;
      continue;
    }

    let event: JsonObject;
    let identifiers: string[];
    if (existing) {
      event = mergeEvents(existing.event, p.event);
      identifiers = identifiersOf(event);
      addContribution(dataSetId, hourOf(existing.firstReceivedAt), existing.event, existing.measurementOnly, -1);
      count(dataSetId, arrivalHour, 'merged', 1);
      merged++;
    } else {
      event = p.event;
      identifiers = p.identifiers;
      created++;
    }
    const measurementOnly = (existing?.measurementOnly ?? false) || p.measurementOnly;

    // Identity.
    let identityKey: string | null = null;
    const roots = new Map<string, MutableNode>();
    if (existing?.identityKey != null) {
      const root = find(dataSetId, existing.identityKey, record.seq);
      roots.set(root.identityKey, root);
    }
    for (const identifier of identifiers) {
      const linked = links.get(pairKey(dataSetId, identifier));
      if (linked === undefined) continue;
      const root = find(dataSetId, linked, record.seq);
      roots.set(root.identityKey, root);
    }
    if (roots.size > 0 || identifiers.length > 0) {
      let survivor: MutableNode;
      if (roots.size === 0) {
        const key = identityKeyFor(record.seq);
        survivor = { dataSetId, identityKey: key, parent: null, createdSeq: record.seq, eventCount: 0, identifierCount: 0 };
        nodes.set(pairKey(dataSetId, key), survivor);
      } else {
        const ordered = [...roots.values()].sort((a, b) => a.createdSeq - b.createdSeq || (a.identityKey < b.identityKey ? -1 : 1));
        survivor = ordered[0]!;
        for (const absorbed of ordered.slice(1)) {
          survivor.eventCount += absorbed.eventCount;
          survivor.identifierCount += absorbed.identifierCount;
          absorbed.parent = survivor.identityKey;
          dirtyNodes.add(pairKey(dataSetId, absorbed.identityKey));
          // Keep trees flat: whatever pointed to the absorbed identity now points to the survivor.
          const survivorChildren = childrenOf(dataSetId, survivor.identityKey);
          const absorbedPk = pairKey(dataSetId, absorbed.identityKey);
          for (const child of children.get(absorbedPk) ?? []) {
            child.parent = survivor.identityKey;
            dirtyNodes.add(pairKey(dataSetId, child.identityKey));
            survivorChildren.push(child);
          }
          children.delete(absorbedPk);
          survivorChildren.push(absorbed);
          moves.push({ dataSetId, from: absorbed.identityKey, to: survivor.identityKey });
        }
      }
      for (const identifier of identifiers) {
        const pk = pairKey(dataSetId, identifier);
        if (links.has(pk)) continue;
        links.set(pk, survivor.identityKey);
        newLinks.push({ dataSetId, identifier, identityKey: survivor.identityKey });
        survivor.identifierCount++;
      }
      if (existing?.identityKey == null) survivor.eventCount++;
      dirtyNodes.add(pairKey(dataSetId, survivor.identityKey));
      identityKey = survivor.identityKey;
    }

    const next: MergedRecord = {
      dataSetId,
      recordKey: p.key,
      eventId: typeof event.id === 'string' && event.id !== '' ? event.id : null,
      firstSeq: existing?.firstSeq ?? record.seq,
      lastSeq: record.seq,
      firstReceivedAt: existing ? Math.min(existing.firstReceivedAt, record.received_at) : record.received_at,
      lastReceivedAt: existing ? Math.max(existing.lastReceivedAt, record.received_at) : record.received_at,
      mergedCount: (existing?.mergedCount ?? 0) + 1,
      identityKey,
      measurementOnly,
      event,
    };
    addContribution(dataSetId, hourOf(next.firstReceivedAt), event, measurementOnly, 1);
    records$.set(rk, next);
    dirtyRecords.add(rk);
  }

  await tx.writeRecords([...dirtyRecords].map((rk) => records$.get(rk)!));
  await tx.writeIdentities([...dirtyNodes].map((pk) => nodes.get(pk)!));
  if (moves.length > 0) await tx.reparentIdentities(moves);
  if (newLinks.length > 0) await tx.linkIdentifiers(newLinks);
  const deltas: DataSetCounterDelta[] = [];
  for (const [k, n] of counters) {
    if (n === 0) continue;
    const [dataSetId, hour, name] = k.split('\u0000') as [string, string, string];
    deltas.push({ dataSetId, hour: Number(hour), name, n });
  }
  await tx.addCounters(deltas);
  return { records: records.length, created, merged, discarded };
}
