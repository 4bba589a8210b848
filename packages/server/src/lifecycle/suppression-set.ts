/**
 * The suppression list held by a consumer: digests by data set, and the key they were made with.
 * A record is suppressed when the digest of any of its identifiers, in canonical form
 * (identifier-digest.ts: a SHA-256 hash whichever field carries it, a UUID however it is spelled),
 * is listed for its data set; data sets without suppressions cost one Map lookup per record. Its
 * owner (a SuppressionList) reloads it when the store's version moved.
 */
import { canonicalIdentifier, identifierDigest } from './identifier-digest.js';

export class SuppressionSet {
  #key: Buffer | null = null;
  #byDataSet = new Map<string, Set<string>>();
  /** The store's version this set was loaded at (-1: never loaded). */
  version = -1;

  load(key: Buffer, version: number, rows: readonly { data_set_id: string; digest: string }[]): void {
    const next = new Map<string, Set<string>>();
    for (const row of rows) {
      let set = next.get(row.data_set_id);
      if (!set) next.set(row.data_set_id, (set = new Set()));
      set.add(row.digest);
    }
    this.#key = key;
    this.#byDataSet = next;
    this.version = version;
  }

  suppressed(dataSetId: string, identifiers: readonly string[]): boolean {
    const set = this.#byDataSet.get(dataSetId);
    if (!set || identifiers.length === 0 || !this.#key) return false;
    const seen = new Set<string>();
    for (const identifier of identifiers) {
      const canonical = canonicalIdentifier(identifier);
      if (seen.has(canonical)) continue; // the same hash in two fields: one digest
      seen.add(canonical);
      if (set.has(identifierDigest(this.#key, dataSetId, canonical))) return true;
    }
    return false;
  }
}
