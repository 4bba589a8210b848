/**
 * A data set's merged view as its readers see it (ViewStore reads: the export in order of first
 * arrival, each record's identity resolved, the counters), as one comparable value: for comparing
 * two views of the same queue whatever their layout.
 */
import type { MergedRecord, ViewStore } from '../../src/merged-view/view-store.js';

export async function viewSnapshot(view: ViewStore, dataSetId: string) {
  const records: MergedRecord[] = [];
  await view.exportRecords(dataSetId, 0, (page) => void records.push(...page));
  const out = [];
  for (const r of records) {
    const identity = r.identityKey === null ? null : await view.getIdentity(dataSetId, r.identityKey);
    out.push({ ...r, identityKey: identity?.identityKey ?? null, identity: identity && { ...identity, requestedKey: undefined } });
  }
  const counters = (await view.counters(dataSetId, 0)).map((c) => `${c.hour} ${c.name} ${c.n}`).sort();
  return { records: out, counters };
}
