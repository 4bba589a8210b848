/**
 * Black-box, against a real server and its worker: `identities forget --suppress` drops later events
 * that carry the suppressed email hash in another hashed field (customer_identifier, uids[].id,
 * phone_numbers) and the suppressed device id spelled otherwise (no hyphens, braces, upper case),
 * before the merged view; events without them are kept (issue 29, point 3).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cli, cliJson, consumerCaughtUp, provision, startServer, tempDataDir } from '../helpers/server-process.js';
import { postSigned } from '../helpers/https-client.js';
import { sha } from '../helpers/event-generator.js';
import { waitFor } from '../helpers/fault-tools.js';
import { purchaseEvent } from '../helpers/purchase-event.js';

const event = (id: string, userData: Record<string, unknown>) => purchaseEvent('shop', id, userData);

test('suppression matches a hash in any hashed field and a device id in any spelling', { timeout: 120_000 }, async () => {
  const dataDir = tempDataDir();
  const creds = await provision(dataDir, ['shop']);
  const server = await startServer({ dataDir, args: ['--workers', '1'] });
  try {
    const H = sha('suppress-me@example.com');
    const KEEP = sha('keep-me@example.com');
    const DEVICE = '6f9619ff-8b86-d011-b42d-00cf4fc964ff';
    for (const identifier of [`email:${H}`, `ifa:${DEVICE}`]) {
      const r = await cliJson(dataDir, ['identities', 'forget', 'shop', '--identifier', identifier, '--suppress']);
      assert.equal(r.state, 'done');
    }
    const dropped = [
      event('as-cid', { customer_identifier: H }),
      event('as-uid', { uids: [{ source: 'example.com', id: H }] }),
      event('as-phone', { phone_numbers: [H] }),
      event('as-email', { email_address: [H] }),
      event('device-plain', { ifa: DEVICE }),
      event('device-no-hyphens', { ifa: DEVICE.replaceAll('-', '') }),
      event('device-braces', { ifa: `{${DEVICE.toUpperCase()}}` }),
    ];
    const kept = [event('keep-email', { email_address: [KEEP] }), event('keep-cid', { customer_identifier: KEEP }), event('keep-device', { ifa: '11111111-2222-3333-4444-555555555555' })];
    const res = await postSigned(server.port, server.ca, creds, 'shop', JSON.stringify({ events: [...dropped, ...kept] }));
    assert.equal(res.status, 200, res.text);
    await consumerCaughtUp(dataDir, 30_000);
    for (const e of kept) assert.equal((await cli(dataDir, ['events', 'get', 'shop', e.id])).code, 0, `${e.id} is in the view`);
    for (const e of dropped) assert.notEqual((await cli(dataDir, ['events', 'get', 'shop', e.id])).code, 0, `${e.id} was suppressed`);
    const stats = await cliJson(dataDir, ['stats', 'shop', '--since', '1h']);
    assert.equal(stats.totals.suppressed, dropped.length);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

test('forget deletes what suppression would drop: every identity linked by a spelling of the identifier, in the view and the queue', { timeout: 120_000 }, async () => {
  const dataDir = tempDataDir();
  const creds = await provision(dataDir, ['shop']);
  const server = await startServer({ dataDir, args: ['--workers', '1'] });
  try {
    const H = sha('forget-me@example.com');
    const KEEP = sha('keep-me@example.com');
    const DEVICE = '6f9619ff-8b86-d011-b42d-00cf4fc964ff';
    // Each of these is its own identity in the view (the typed spellings differ, so they never link).
    const byHash = [
      event('h-email', { email_address: [H] }),
      event('h-cid', { customer_identifier: H }),
      event('h-uid', { uids: [{ source: 'example.com', id: H }] }),
    ];
    const byDevice = [
      event('d-plain', { ifa: DEVICE }),
      event('d-no-hyphens', { ifa: DEVICE.replaceAll('-', '') }),
      event('d-braces', { ifa: `{${DEVICE.toUpperCase()}}` }),
    ];
    const kept = [event('keep-email', { email_address: [KEEP] }), event('keep-device', { ifa: '11111111-2222-3333-4444-555555555555' })];
    const res = await postSigned(server.port, server.ca, creds, 'shop', JSON.stringify({ events: [...byHash, ...byDevice, ...kept] }));
    assert.equal(res.status, 200, res.text);
    await consumerCaughtUp(dataDir, 30_000);

    const device = await cliJson(dataDir, ['identities', 'forget', 'shop', '--identifier', `ifa:${DEVICE}`]);
    assert.equal(device.state, 'done');
    assert.equal(device.result.view_records, byDevice.length, JSON.stringify(device.result));
    assert.equal(device.result.identities, byDevice.length);
    const hash = await cliJson(dataDir, ['identities', 'forget', 'shop', '--identifier', `phone:${H}`]);
    assert.equal(hash.state, 'done');
    assert.equal(hash.result.view_records, byHash.length, JSON.stringify(hash.result));
    assert.equal(hash.result.identities, byHash.length);
    for (const e of [...byHash, ...byDevice]) assert.notEqual((await cli(dataDir, ['events', 'get', 'shop', e.id])).code, 0, `${e.id} was deleted`);
    for (const e of kept) assert.equal((await cli(dataDir, ['events', 'get', 'shop', e.id])).code, 0, `${e.id} is in the view`);
    // The queue's copies went too (the export holds only the kept events).
    const exported = await cli(dataDir, ['queue', 'export', '--data-set', 'shop']);
    for (const e of [...byHash, ...byDevice]) assert.ok(!exported.stdout.includes(`"${e.id}"`), `${e.id} is not in the queue`);
    for (const e of kept) assert.ok(exported.stdout.includes(`"${e.id}"`), `${e.id} is in the queue`);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});
