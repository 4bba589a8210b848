import { test } from 'node:test';
import assert from 'node:assert/strict';
import { defaultServingProcesses } from '../../src/cluster/default-serving-processes.js';

test('one serving process per core, less one for the consumer when this node runs it', () => {
  assert.equal(defaultServingProcesses(2, true), 1);
  assert.equal(defaultServingProcesses(8, true), 7);
  assert.equal(defaultServingProcesses(2, false), 2);
  assert.equal(defaultServingProcesses(8, false), 8);
});

test('at least one serving process, whatever the core count', () => {
  assert.equal(defaultServingProcesses(1, true), 1);
  assert.equal(defaultServingProcesses(1, false), 1);
  assert.equal(defaultServingProcesses(0, true), 1);
});
