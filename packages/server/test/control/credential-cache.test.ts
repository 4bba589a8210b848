/**
 * control/credential-cache.ts: the snapshot follows the control plane's version; while the control
 * plane cannot be read, the last snapshot keeps serving, and the failure is said once (at the
 * first failed poll) and the recovery once (at the first poll that succeeds after it), not at every
 * poll of an outage. The control plane here is a stand-in with a version and a switch: the cache
 * is what is under test.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CredentialCache } from '../../src/control/credential-cache.js';
import type { ControlPlane, CredentialSnapshot } from '../../src/control/control-plane.js';

test('a control plane away: the last snapshot serves, the failure and the recovery are each said once', async () => {
  let version = 1;
  let away = false;
  const controlPlane = {
    async version() {
      if (away) throw new Error('connect ECONNREFUSED');
      return version;
    },
    async loadSnapshot(): Promise<CredentialSnapshot> {
      if (away) throw new Error('connect ECONNREFUSED');
      return { version, keys: new Map(), dataSets: new Map() };
    },
  } as unknown as ControlPlane;
  const errors: string[] = [];
  let recovered = 0;
  const loaded: number[] = [];
  const cache = await CredentialCache.start(controlPlane, {
    intervalMs: 3_600_000, // polled by hand below
    onChange: (s) => loaded.push(s.version),
    onError: (e) => errors.push(e.message),
    onRecovered: () => recovered++,
  });
  try {
    assert.deepEqual(loaded, [1]);
    away = true;
    for (let i = 0; i < 5; i++) await cache.refresh();
    assert.deepEqual(errors, ['connect ECONNREFUSED'], 'five failed polls, one failure said');
    assert.equal(cache.current().version, 1, 'the last snapshot keeps serving');
    assert.equal(recovered, 0);
    away = false;
    version = 2;
    await cache.refresh();
    await cache.refresh();
    assert.equal(recovered, 1, 'the recovery is said once');
    assert.deepEqual(loaded, [1, 2], 'and the change made meanwhile is loaded');
    away = true;
    await cache.refresh();
    assert.equal(errors.length, 2, 'a new outage is said again');
  } finally {
    cache.stop();
  }
});
