/**
 * The identity forest writes back only what changed: a record that adds nothing to its identity
 * (the commonest re-send) writes no node, while every real change (a new identity, one more record,
 * a new identifier, a union) still does. The model test (batch-applier-model.test.ts) checks the
 * resulting view; this checks that unchanged nodes are not rewritten.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { IdentityForest } from '../../src/consumer/identity-forest.js';
import { identityKeyFor } from '../../src/model/identity-key.js';
import { pairKey, type IdentityNode } from '../../src/merged-view/view-store.js';

const DS = 'ds';
const node = (identityKey: string, createdSeq: number, eventCount: number, identifierCount: number): IdentityNode => ({
  dataSetId: DS, identityKey, parent: null, createdSeq, eventCount, identifierCount,
});

/** A forest as a batch would load it: identity ik_1 with identifiers a and b, identity ik_5 with c. */
function loaded() {
  const nodes = new Map([
    [pairKey(DS, 'ik_1'), node('ik_1', 1, 2, 2)],
    [pairKey(DS, 'ik_5'), node('ik_5', 5, 1, 1)],
  ]);
  const links = new Map([
    [pairKey(DS, 'email:a'), 'ik_1'],
    [pairKey(DS, 'phone:b'), 'ik_1'],
    [pairKey(DS, 'cid:c'), 'ik_5'],
  ]);
  return new IdentityForest(nodes, links);
}

test('a re-send whose identifiers are all linked to its identity writes no node and no link', () => {
  const forest = loaded();
  assert.equal(forest.apply(DS, 10, 'ik_1', ['email:a', 'phone:b']), 'ik_1');
  assert.deepEqual(forest.changedNodes(), []);
  assert.deepEqual(forest.newLinks(), []);
  assert.deepEqual(forest.moves(), []);
});

test('a new record, a new identifier and a union each write the nodes they change', () => {
  // A new record of a known identity: one more event.
  let forest = loaded();
  assert.equal(forest.apply(DS, 10, null, ['email:a']), 'ik_1');
  assert.deepEqual(forest.changedNodes(), [node('ik_1', 1, 3, 2)]);

  // A re-send that brings a new identifier: one more identifier, and its link.
  forest = loaded();
  assert.equal(forest.apply(DS, 10, 'ik_1', ['email:a', 'uid:d']), 'ik_1');
  assert.deepEqual(forest.changedNodes(), [node('ik_1', 1, 2, 3)]);
  assert.deepEqual(forest.newLinks(), [{ dataSetId: DS, identifier: 'uid:d', identityKey: 'ik_1' }]);

  // A re-send joining two identities: the older survives and absorbs the other; both are written.
  forest = loaded();
  assert.equal(forest.apply(DS, 10, 'ik_1', ['cid:c', 'email:a']), 'ik_1');
  const changed = new Map(forest.changedNodes().map((n) => [n.identityKey, n]));
  assert.deepEqual(changed.get('ik_1'), node('ik_1', 1, 3, 3));
  assert.deepEqual(changed.get('ik_5'), { ...node('ik_5', 5, 1, 1), parent: 'ik_1' });
  assert.equal(changed.size, 2);

  // A record with identifiers nobody has: a new identity named after its queue position.
  forest = loaded();
  assert.equal(forest.apply(DS, 12, null, ['ifa:z']), identityKeyFor(12));
  assert.deepEqual(forest.changedNodes(), [node(identityKeyFor(12), 12, 1, 1)]);
});
