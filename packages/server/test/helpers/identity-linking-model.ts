/**
 * The merged view's identity linking for one applied record, as docs/guides/merged-view.md
 * ("Identity linking") states it, written from the guide rather than from consumer/identity-forest.ts:
 * the model of the lifecycle model tests (test/lifecycle/deletion-model.test.ts,
 * retention-model.test.ts), on one data set's maps, and the check of a view's identities against it.
 */
import assert from 'node:assert/strict';
import type { ViewStore } from '../../src/merged-view/view-store.js';

/** One data set's identities: each key's root (trees are flat), the queue position that created each key, the identifier links. */
export interface IdentityMaps {
  readonly nodes: Map<string, string>;
  readonly created: Map<string, number>;
  readonly links: Map<string, string>;
}

/** The root of `key`, or null when there is no such (live) key. */
export const rootOf = (maps: IdentityMaps, key: string | null): string | null => (key === null ? null : (maps.nodes.get(key) ?? null));

/**
 * Links a record applied at queue position `seq`: `previous` is the identity key its merged record
 * had (null: none, or a new record), `identifiers` those of its merged event. Returns the record's
 * identity key; `onLinked` hears of every identifier linked by it (not linked before, or linked to a
 * deleted identity).
 */
export function linkRecord(maps: IdentityMaps, seq: number, previous: string | null, identifiers: readonly string[], onLinked?: (identifier: string) => void): string | null {
  const { nodes, created, links } = maps;
  const live = new Set<string>();
  const oldRoot = rootOf(maps, previous);
  if (oldRoot !== null) live.add(oldRoot);
  for (const i of identifiers) {
    const r = rootOf(maps, links.get(i) ?? null);
    if (r !== null) live.add(r);
  }
  let identity: string | null = null;
  if (live.size === 0 && identifiers.length > 0) {
    // "ik_<queue position of the record that started it>"
    identity = `ik_${seq}`;
    nodes.set(identity, identity);
    created.set(identity, seq);
  } else if (live.size > 0) {
    // "the older key (earlier queue position) survives and the other is absorbed"
    identity = [...live].sort((a, b) => created.get(a)! - created.get(b)!)[0]!;
    for (const [key, r] of nodes) if (live.has(r)) nodes.set(key, identity);
  }
  for (const i of identifiers) {
    if (links.has(i) && rootOf(maps, links.get(i)!) !== null) continue;
    links.set(i, identity!);
    onLinked?.(i);
  }
  return identity;
}

/** Keys of the identity tree of `root`, and the identifiers linked to them (sorted). */
export function treeOf(maps: IdentityMaps, root: string): { keys: string[]; identifiers: string[] } {
  const keys = [...maps.nodes].filter(([, r]) => r === root).map(([k]) => k);
  const set = new Set(keys);
  const identifiers = [...maps.links].filter(([, k]) => set.has(k)).map(([i]) => i).sort();
  return { keys, identifiers };
}

/**
 * Checks a view's identities of data set `ds` against the model's maps: every key ever created
 * answers as modelled (null once deleted; else its root, event count (`eventCountOf` its root),
 * identifiers and absorbed keys), and each of `identifiers` has a link row exactly when the model has
 * a link, resolving to the model's root (a link row left for a deleted identity would keep an
 * identifier). `label` names an identifier in messages.
 */
export async function assertIdentities(
  view: Pick<ViewStore, 'getIdentity' | 'identityOfIdentifier' | 'resolveIdentity'>,
  ds: string,
  maps: IdentityMaps,
  eventCountOf: (root: string) => number,
  identifiers: readonly string[],
  label: (identifier: string) => string,
): Promise<void> {
  for (const key of maps.created.keys()) {
    const root = rootOf(maps, key);
    const real = await view.getIdentity(ds, key);
    if (root === null) {
      assert.equal(real, null, `${ds} identity ${key} is deleted`);
      continue;
    }
    const tree = treeOf(maps, root);
    assert.ok(real, `${ds} identity ${key} stays`);
    assert.deepEqual(
      { identityKey: real.identityKey, eventCount: real.eventCount, identifiers: real.identifiers, absorbedKeys: [...real.absorbedKeys].sort() },
      { identityKey: root, eventCount: eventCountOf(root), identifiers: tree.identifiers, absorbedKeys: tree.keys.filter((k) => k !== root).sort() },
      `${ds} identity ${key}`,
    );
  }
  for (const identifier of identifiers) {
    const linked = await view.identityOfIdentifier(ds, identifier);
    assert.equal(linked !== null, maps.links.has(identifier), `${ds} link row of ${label(identifier)}`);
    assert.equal(linked === null ? null : await view.resolveIdentity(ds, linked), rootOf(maps, maps.links.get(identifier) ?? null), `${ds} link of ${label(identifier)}`);
  }
}

/** The map of data set `ds` in a map by data set (created empty on first use). */
export function mapOf<T>(byDataSet: Map<string, Map<string, T>>, ds: string): Map<string, T> {
  let m = byDataSet.get(ds);
  if (!m) byDataSet.set(ds, (m = new Map()));
  return m;
}

/** IdentityMaps per data set: the identity part of a model that keeps several data sets. */
export class DataSetIdentities {
  /** Per data set: live identity node → its root (trees are flat: "the older key survives"). */
  readonly nodes = new Map<string, Map<string, string>>();
  /** Per data set: every key ever created → its queue position. */
  readonly created = new Map<string, Map<string, number>>();
  /** Per data set: identifier → the key it was linked to. */
  readonly links = new Map<string, Map<string, string>>();

  /** The data set's identity maps. */
  mapsOf(ds: string): IdentityMaps {
    return { nodes: mapOf(this.nodes, ds), created: mapOf(this.created, ds), links: mapOf(this.links, ds) };
  }

  root(ds: string, key: string | null): string | null {
    return rootOf(this.mapsOf(ds), key);
  }

  /** Keys of the identity tree of `root`, and its identifiers. */
  tree(ds: string, root: string): { keys: string[]; identifiers: string[] } {
    return treeOf(this.mapsOf(ds), root);
  }
}
