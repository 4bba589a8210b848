/**
 * The identity part of applying a batch: the persisted union-find of identities, held in memory
 * for the batch (the nodes and identifier links the batch loaded), updated record by record in
 * queue order, and written back as changed nodes, re-parentings and new links.
 *
 * Rule (docs/guides/merged-view.md "Identity linking"), per applied record: the identities of its identifiers and the
 * record's previous identity are united; the oldest (lowest created_seq, then key) survives and the
 * others point to it; trees stay flat (whatever pointed to an absorbed identity now points to the
 * survivor); identifiers not yet linked link to the survivor; a record with neither identifiers nor
 * a previous identity has none; a record with no previous identity counts as one more event of the
 * survivor. A new identity is named after the queue position of the record that started it, so the
 * forest is a function of the queue, never of the clock or of batch boundaries.
 */
import { pairKey, type IdentifierLink, type IdentityNode, type ViewTransaction } from '../merged-view/view-store.js';
import { identityKeyFor } from '../model/identity-key.js';

type MutableNode = { -readonly [K in keyof IdentityNode]: IdentityNode[K] };

export class IdentityForest {
  readonly #nodes = new Map<string, MutableNode>();
  readonly #links: Map<string, string>;
  /** Loaded and created nodes by their parent, so that a union re-points an absorbed identity's members at once. */
  readonly #children = new Map<string, MutableNode[]>();
  readonly #dirty = new Set<string>();
  readonly #newLinks: IdentifierLink[] = [];
  readonly #moves: { dataSetId: string; from: string; to: string }[] = [];

  /** `links`: identity key by pairKey(dataSetId, identifier), as loaded; it is updated in place. */
  constructor(nodes: ReadonlyMap<string, IdentityNode>, links: Map<string, string>) {
    for (const [pk, node] of nodes) this.#nodes.set(pk, { ...node });
    this.#links = links;
    for (const node of this.#nodes.values()) if (node.parent !== null) this.#childrenOf(node.dataSetId, node.parent).push(node);
  }

  #childrenOf(dataSetId: string, key: string): MutableNode[] {
    const pk = pairKey(dataSetId, key);
    let list = this.#children.get(pk);
    if (!list) this.#children.set(pk, (list = []));
    return list;
  }

  #node(dataSetId: string, key: string, seq: number): MutableNode {
    const pk = pairKey(dataSetId, key);
    let node = this.#nodes.get(pk);
    if (!node) {
      // A link or record pointing to a node that does not exist would be a damaged store; treat
      // the key as a root of its own rather than stop the consumer.
      node = { dataSetId, identityKey: key, parent: null, createdSeq: seq, eventCount: 0, identifierCount: 0 };
      this.#nodes.set(pk, node);
      this.#dirty.add(pk);
    }
    return node;
  }

  #find(dataSetId: string, key: string, seq: number): MutableNode {
    let node = this.#node(dataSetId, key, seq);
    while (node.parent !== null) node = this.#node(dataSetId, node.parent, seq);
    return node;
  }

  /**
   * Applies one record: `previous` is the identity its merged record had before (null: none, or a
   * new record), `identifiers` those of its merged event. Returns the record's identity key.
   */
  apply(dataSetId: string, seq: number, previous: string | null, identifiers: readonly string[]): string | null {
    // The roots involved, deduplicated (a handful: a linear scan beats a Set).
    const roots: MutableNode[] = [];
    if (previous !== null) roots.push(this.#find(dataSetId, previous, seq));
    const linkKeys: string[] = new Array(identifiers.length);
    for (let i = 0; i < identifiers.length; i++) {
      const pk = (linkKeys[i] = pairKey(dataSetId, identifiers[i]!));
      const linked = this.#links.get(pk);
      if (linked === undefined) continue;
      const root = this.#find(dataSetId, linked, seq);
      if (!roots.includes(root)) roots.push(root);
    }
    if (roots.length === 0 && identifiers.length === 0) return null;

    let survivor: MutableNode;
    // Whether the survivor changed: a node that did not is not written back (a re-send that adds
    // nothing to its identity, the commonest case, writes no identity row at all).
    let changed = false;
    if (roots.length === 0) {
      const key = identityKeyFor(seq);
      survivor = { dataSetId, identityKey: key, parent: null, createdSeq: seq, eventCount: 0, identifierCount: 0 };
      this.#nodes.set(pairKey(dataSetId, key), survivor);
      changed = true;
    } else {
      if (roots.length > 1) {
        roots.sort((a, b) => a.createdSeq - b.createdSeq || (a.identityKey < b.identityKey ? -1 : 1));
        changed = true;
      }
      survivor = roots[0]!;
      for (let i = 1; i < roots.length; i++) this.#absorb(survivor, roots[i]!);
    }
    for (let i = 0; i < identifiers.length; i++) {
      const pk = linkKeys[i]!;
      if (this.#links.has(pk)) continue;
      this.#links.set(pk, survivor.identityKey);
      this.#newLinks.push({ dataSetId, identifier: identifiers[i]!, identityKey: survivor.identityKey });
      survivor.identifierCount++;
      changed = true;
    }
    if (previous === null) {
      survivor.eventCount++;
      changed = true;
    }
    if (changed) this.#dirty.add(pairKey(dataSetId, survivor.identityKey));
    return survivor.identityKey;
  }

  #absorb(survivor: MutableNode, absorbed: MutableNode): void {
    const { dataSetId } = survivor;
    survivor.eventCount += absorbed.eventCount;
    survivor.identifierCount += absorbed.identifierCount;
    absorbed.parent = survivor.identityKey;
    this.#dirty.add(pairKey(dataSetId, absorbed.identityKey));
    // Keep trees flat: whatever pointed to the absorbed identity now points to the survivor.
    const survivorChildren = this.#childrenOf(dataSetId, survivor.identityKey);
    const absorbedPk = pairKey(dataSetId, absorbed.identityKey);
    for (const child of this.#children.get(absorbedPk) ?? []) {
      child.parent = survivor.identityKey;
      this.#dirty.add(pairKey(dataSetId, child.identityKey));
      survivorChildren.push(child);
    }
    this.#children.delete(absorbedPk);
    survivorChildren.push(absorbed);
    this.#moves.push({ dataSetId, from: absorbed.identityKey, to: survivor.identityKey });
  }

  /** Nodes created or changed by the batch. */
  changedNodes(): IdentityNode[] {
    return [...this.#dirty].map((pk) => this.#nodes.get(pk)!);
  }

  /** Unions: stored nodes whose parent was absorbed must point to the survivor. */
  moves(): readonly { dataSetId: string; from: string; to: string }[] {
    return this.#moves;
  }

  newLinks(): readonly IdentifierLink[] {
    return this.#newLinks;
  }

  /** Writes what the batch changed in `tx`: nodes, then re-parentings and new links (when there are any). */
  async writeChanges(tx: ViewTransaction): Promise<void> {
    await tx.writeIdentities(this.changedNodes());
    if (this.#moves.length > 0) await tx.reparentIdentities(this.#moves);
    if (this.#newLinks.length > 0) await tx.linkIdentifiers(this.#newLinks);
  }
}
