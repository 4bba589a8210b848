/**
 * Batch loading: decodes what the batch needs from each queued record once (normalized event,
 * record key, identifiers, measurement-only flag), then loads everything the batch touches from the
 * view store with one bulk read per kind: the stored records of the batch's keys, the identifier
 * links of their identifiers (the batch's own and those its stored records carry, since a merged
 * event carries both), the identity nodes those links and records point to, and (trees are flat)
 * their roots.
 */
import { isMeasurementOnly } from '../analytics/hourly.js';
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

export async function loadBatch(tx: ViewTransaction, records: readonly QueueRecord[]): Promise<LoadedBatch> {
  const prepared = prepareRecords(records);
  const refs = new Map<string, { dataSetId: string; recordKey: string }>();
  const idPairs = new Map<string, { dataSetId: string; identifier: string }>();
  const wantIdentifier = (dataSetId: string, identifier: string) => {
    const pk = pairKey(dataSetId, identifier);
    if (!idPairs.has(pk)) idPairs.set(pk, { dataSetId, identifier });
  };
  for (const p of prepared) {
    if (!refs.has(p.pk)) refs.set(p.pk, { dataSetId: p.record.data_set_id, recordKey: p.key });
    for (const identifier of p.identifiers) wantIdentifier(p.record.data_set_id, identifier);
  }
  const stored = await tx.loadRecords([...refs.values()]);
  for (const record of stored.values()) for (const identifier of identifiersOf(record.event)) wantIdentifier(record.dataSetId, identifier);
  const links = await tx.loadIdentifierLinks([...idPairs.values()]);

  const nodeRefs = new Map<string, { dataSetId: string; identityKey: string }>();
  const wantNode = (dataSetId: string, identityKey: string) => {
    const pk = pairKey(dataSetId, identityKey);
    if (!nodeRefs.has(pk)) nodeRefs.set(pk, { dataSetId, identityKey });
  };
  for (const [pk, key] of links) wantNode(idPairs.get(pk)!.dataSetId, key);
  for (const record of stored.values()) if (record.identityKey !== null) wantNode(record.dataSetId, record.identityKey);
  const nodes = new Map(await tx.loadIdentities([...nodeRefs.values()]));
  const parents = new Map<string, { dataSetId: string; identityKey: string }>();
  for (const node of nodes.values()) {
    if (node.parent !== null && !nodes.has(pairKey(node.dataSetId, node.parent))) {
      parents.set(pairKey(node.dataSetId, node.parent), { dataSetId: node.dataSetId, identityKey: node.parent });
    }
  }
  if (parents.size > 0) for (const [pk, node] of await tx.loadIdentities([...parents.values()])) nodes.set(pk, node);
  return { prepared, records: stored, links, nodes };
}
