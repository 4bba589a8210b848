/**
 * Claims of deletion requests (issue 29): the owner of a claim is this host's process by pid and
 * start time; a claim whose process is gone is taken over at once, a live owner's is not (until its
 * lease lapses), and the owner renews its own. Real processes and a real lifecycle.db.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { ownerIsDead, SELF_OWNER } from '../../src/lifecycle/claim-owner.js';
import { SqliteLifecycleStore } from '../../src/lifecycle/sqlite-lifecycle-store.js';
import { tempDataDir } from '../helpers/server-process.js';

/** The owner string of another live process, and a way to end it. */
async function otherProcess(): Promise<{ owner: () => string; kill: () => Promise<void> }> {
  const child = spawn(process.execPath, ['-e', `
    const { readFileSync } = require('node:fs');
    const stat = readFileSync('/proc/self/stat', 'utf8');
    const start = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
    const boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    process.stdout.write(require('node:os').hostname() + '/' + process.pid + '/' + boot + ':' + start + '\\n');
    setInterval(() => {}, 1000);
  `], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = (await once(child.stdout!.setEncoding('utf8'), 'data')) as [string];
  return {
    owner: () => line.trim(),
    kill: async () => {
      child.kill('SIGKILL');
      await once(child, 'exit');
    },
  };
}

test('a claim owner is alive while its process runs, dead once it is gone; other hosts are not judged', { skip: process.platform !== 'linux' && 'reads /proc' }, async () => {
  assert.equal(ownerIsDead(SELF_OWNER), false, 'this process');
  const other = await otherProcess();
  assert.equal(ownerIsDead(other.owner()), false, 'a live process');
  const [host, pid, start] = other.owner().split('/');
  assert.equal(ownerIsDead(`${host}/${pid}/${start!.split(':')[0]}:1`), true, 'the same pid with another start time: not the owner');
  await other.kill();
  assert.equal(ownerIsDead(other.owner()), true, 'killed');
  assert.equal(ownerIsDead(`another-${hostname()}/1/x:1`), false, 'another host: unknown, its lease decides');
  assert.equal(ownerIsDead(null), true);
});

test('lifecycle.db claims: a live owner keeps its request, a dead owner loses it at once, the owner renews its own', { skip: process.platform !== 'linux' && 'reads /proc' }, async () => {
  const store = new SqliteLifecycleStore(join(tempDataDir('ecapi-claim-'), 'lifecycle.db'));
  try {
    const request = await store.request({ dataSetId: 'ds', kind: 'delete_event', target: 'e1', suppress: false, boundSeq: 1, actor: 'test' });
    const other = await otherProcess();
    const now = Date.now();
    assert.equal(await store.claim(request.id, 30_000, now, other.owner()), true, 'first claim');
    assert.equal(await store.claim(request.id, 30_000, now + 1000, SELF_OWNER), false, 'a live owner keeps it');
    assert.equal(await store.claim(request.id, 30_000, now + 2000, other.owner()), true, 'the owner renews');
    await other.kill();
    assert.equal(await store.claim(request.id, 30_000, now + 3000, SELF_OWNER), true, 'its process is gone: taken over at once, long before the lease ends');
    assert.equal(await store.claim(request.id, 30_000, now + 4000, other.owner()), false, 'the dead owner cannot have it back while the new one lives');
    await store.complete(request.id, { view_records: 0, identities: 0, identifier_links: 0, queue_events: 0, suppressed_identifiers: 0 });
    assert.equal(await store.claim(request.id, 30_000, now + 5000, SELF_OWNER), false, 'done: nothing to claim');
  } finally {
    await store.close();
  }
});
