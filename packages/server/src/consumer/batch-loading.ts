/**
 * Batch loading: decodes what the batch needs from each queued record once (normalized event,
 * record key, identifiers, measurement-only flag), then loads everything the batch touches from the
 * view store with one bulk read per kind: the stored records of the batch's keys, the identifier
 * links of their identifiers (the batch's own and those its stored records carry, since a merged
 * event carries both), the identity nodes those links and records point to, and (trees are flat)
 * their roots.
 */
import { isMeasurementOnly } from '../merged-view/record-counters.js';
import { identifiersOf, normalizeEvent } from '../merged-view/identity.js';
import { recordKeyOf, type JsonObject } from '../merged-view/merge.js';
import { pairKey, type IdentityNode, type MergedRecord, type ViewTransaction } from '../merged-view/view-store.js';
import type { QueueRecord } from '../queue/event-queue.js';

/** A queued record, decoded once for the whole batch. */
export interface PreparedRecord {
  readonly record: QueueRecord;
  readonly event: JsonObject;
  /** Record key within the data set (merge.ts recordKeyOf). */
  readonly key: string;
  /** pairKey(data set, key). */
  readonly pk: string;
  readonly identifiers: string[];
  readonly measurementOnly: boolean;
}

export interface LoadedBatch {
  readonly prepared: readonly PreparedRecord[];
  /** Stored records by pairKey(dataSetId, recordKey). */
  readonly records: ReadonlyMap<string, MergedRecord>;
  /** Identity key by pairKey(dataSetId, identifier). */
  readonly links: Map<string, string>;
  /** Identity nodes by pairKey(dataSetId, identityKey). */
  readonly nodes: ReadonlyMap<string, IdentityNode>;
}

export function prepareRecords(records: readonly QueueRecord[]): PreparedRecord[] {
  return records.map((record) => {
    const event = normalizeEvent(record.event);
    const key = recordKeyOf(event, record.seq);
    return {
      record,
      event,
      key,
      pk: pairKey(record.data_set_id, key),
      identifiers: identifiersOf(event),
      measurementOnly: isMeasurementOnly(record.event, record.meta),
    };
  });
}

/** Keys wanted, per data set (deduplicated), for one bulk read. */
export class Wanted {
  readonly byDataSet = new Map<string, Set<string>>();
  add(dataSetId: string, key: string): void {
    let keys = this.byDataSet.get(dataSetId);
    if (!keys) this.byDataSet.set(dataSetId, (keys = new Set()));
    keys.add(key);
  }
  /** (data set, key) pairs, built by `make` (a plain literal per kind: no computed property names, which V8 keeps in slow objects). */
  pairs<T>(make: (dataSetId: string, key: string) => T): T[] {
    const out: T[] = [];
    for (const [dataSetId, keys] of this.byDataSet) for (const key of keys) out.push(make(dataSetId, key));
    return out;
  }
}

export const recordRef = (dataSetId: string, recordKey: string) => ({ dataSetId, recordKey });
export const identifierRef = (dataSetId: string, identifier: string) => ({ dataSetId, identifier });
const identityRef = (dataSetId: string, identityKey: string) => ({ dataSetId, identityKey });

/**
 * The identity nodes the batch's links and records point to, and (trees are flat) their roots:
 * one bulk read, and a second for the parents not already loaded. `records`: anything that names
 * a record's identity (stored merged records, or the sharded layout's record identities).
 */
export async function loadIdentityNodes(
  tx: ViewTransaction,
  links: ReadonlyMap<string, string>,
  records: Iterable<{ readonly dataSetId: string; readonly identityKey: string | null }>,
): Promise<Map<string, IdentityNode>> {
  const nodeKeys = new Wanted();
  for (const [pk, key] of links) nodeKeys.add(pk.slice(0, pk.indexOf('\u0000')), key);
  for (const record of records) if (record.identityKey !== null) nodeKeys.add(record.dataSetId, record.identityKey);
  const nodes = new Map(await tx.loadIdentities(nodeKeys.pairs(identityRef)));
  const parents = new Wanted();
  for (const node of nodes.values()) {
    if (node.parent !== null && !nodes.has(pairKey(node.dataSetId, node.parent))) parents.add(node.dataSetId, node.parent);
  }
  if (parents.byDataSet.size > 0) for (const [pk, node] of await tx.loadIdentities(parents.pairs(identityRef))) nodes.set(pk, node);
  return nodes;
}

export async function loadBatch(tx: ViewTransaction, records: readonly QueueRecord[]): Promise<LoadedBatch> {
  const prepared = prepareRecords(records);
  const recordKeys = new Wanted();
  const identifiers = new Wanted();
  for (const p of prepared) {
    recordKeys.add(p.record.data_set_id, p.key);
    for (const identifier of p.identifiers) identifiers.add(p.record.data_set_id, identifier);
  }
  const stored = await tx.loadRecords(recordKeys.pairs(recordRef));
  for (const record of stored.values()) for (const identifier of identifiersOf(record.event)) identifiers.add(record.dataSetId, identifier);
  const links = await tx.loadIdentifierLinks(identifiers.pairs(identifierRef));
  const nodes = await loadIdentityNodes(tx, links, stored.values());
  return { prepared, records: stored, links, nodes };
}
