/**
 * Black-box (issue 15, item 6): `stats`' ingest `accepted` is exact after a SIGKILL of the server.
 * The counts are written by the queue commit that stores the events, so every event acknowledged
 * with 200/207 before the kill is counted, and nothing else; before, they were flushed about once a
 * second from memory into ingest-stats and the last second's counts died with the process.
 * Rejections stay best-effort (never queued): at most what was sent. Runs on both profiles
 * (ECAPI_TEST_PROFILE=postgres). Nothing here depends on timing: the kill may come at any moment
 * after the last acknowledgement.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cliJson, exportQueue, provision, startServer, tempDataDir } from '../helpers/server-process.js';
import { postSigned, sampleEvent } from '../helpers/https-client.js';

test('accepted counts equal the acknowledged events after SIGKILL of the server, per data set', { timeout: 90_000 }, async () => {
  const dataDir = tempDataDir('ecapi-accepted-kill-');
  const creds = await provision(dataDir, ['shop', 'blog']);
  const server = await startServer({ dataDir, args: ['--workers', '1', '--no-worker'] });
  const acknowledged = { shop: 0, blog: 0 };
  let rejectedSent = 0;
  let killed = false;
  try {
    const senders = Array.from({ length: 6 }, async (_, sender) => {
      const ds = sender % 2 === 0 ? 'shop' : 'blog';
      for (let i = 0; i < 25; i++) {
        const size = 1 + ((sender * 7 + i) % 40);
        const events = Array.from({ length: size }, (_, j) => sampleEvent(ds, { id: `s${sender}-r${i}-e${j}` }));
        if (i % 4 === 0) delete events[0]!.timestamp; // some 207s (and all-rejected 400s for single events)
        const res = await postSigned(server.port, server.ca, creds, ds, JSON.stringify({ events }));
        assert.ok(res.status === 200 || res.status === 207 || (res.status === 400 && size === 1), `${res.status} ${res.text}`);
        const errors = ((res.json().errors ?? []) as unknown[]).length;
        rejectedSent += errors;
        if (res.status !== 400) acknowledged[ds] += size - errors;
      }
    });
    await Promise.all(senders);
    // Right after the last acknowledgement: no graceful shutdown, no flush.
    await server.stop('SIGKILL');
    killed = true;
  } finally {
    if (!killed) await server.stop('SIGKILL');
  }
  assert.ok(acknowledged.shop > 500 && acknowledged.blog > 500);

  const queued = await exportQueue(dataDir);
  for (const ds of ['shop', 'blog'] as const) {
    assert.equal(queued.filter((r) => r.data_set_id === ds).length, acknowledged[ds], `${ds}: queued = acknowledged`);
    const stats = await cliJson(dataDir, ['stats', ds]);
    assert.equal(stats.totals.ingest.accepted, acknowledged[ds], `${ds}: stats accepted = acknowledged events`);
    const hours = (stats.hours as { ingest: { accepted: number } }[]).reduce((sum, h) => sum + h.ingest.accepted, 0);
    assert.equal(hours, acknowledged[ds], `${ds}: the hours add up to the total`);
  }
  const rejected = (await cliJson(dataDir, ['stats', 'shop'])).totals.ingest.rejected + (await cliJson(dataDir, ['stats', 'blog'])).totals.ingest.rejected;
  assert.ok(rejected <= rejectedSent, 'rejections are best-effort: never more than were answered');

  // A restarted server goes on counting from there.
  const again = await startServer({ dataDir, args: ['--workers', '1', '--no-worker'] });
  try {
    const res = await postSigned(again.port, again.ca, creds, 'shop', JSON.stringify({ events: [sampleEvent('shop'), sampleEvent('shop')] }));
    assert.equal(res.status, 200, res.text);
  } finally {
    await again.stop('SIGKILL');
  }
  assert.equal((await cliJson(dataDir, ['stats', 'shop'])).totals.ingest.accepted, acknowledged.shop + 2);
});
