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
