/**
 * `events get` of a record a deletion removed says so (issue 29, point 7c), against a real server
 * and its worker: by `identities forget` (every record of the identity) and by `events delete`;
 * a record never sent keeps the generic answer, and the lifecycle store holds the ids only as keyed
 * digests (embedded: no id in clear in lifecycle.db or its WAL).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cli, cliJson, consumerCaughtUp, provision, startServer, tempDataDir, TEST_PROFILE } from '../helpers/server-process.js';
import { postSigned } from '../helpers/https-client.js';
import { sha } from '../helpers/event-generator.js';
import { waitFor } from '../helpers/fault-tools.js';
import { purchaseEvent } from '../helpers/purchase-event.js';

const event = (id: string, email: string) => purchaseEvent('shop', id, { email_address: [email] });

test('events get of a deleted record says which deletion removed it', { timeout: 120_000 }, async () => {
  const dataDir = tempDataDir();
  const creds = await provision(dataDir, ['shop']);
  const server = await startServer({ dataDir, args: ['--workers', '1'] });
  try {
    const A = sha('forgotten@example.com');
    const B = sha('kept@example.com');
    const body = { events: [event('forgotten-event-0001', A), event('forgotten-event-0002', A), event('kept-event-0001', B), event('single-event-0001', B)] };
    assert.equal((await postSigned(server.port, server.ca, creds, 'shop', JSON.stringify(body))).status, 200);
    await consumerCaughtUp(dataDir, 30_000);
    const deleted = await cliJson(dataDir, ['events', 'delete', 'shop', 'single-event-0001']);
    const forgot = await cliJson(dataDir, ['identities', 'forget', 'shop', '--identifier', `email:${A}`]);
    assert.equal(forgot.result.view_records, 2);

    for (const id of ['forgotten-event-0001', 'forgotten-event-0002']) {
      const r = await cli(dataDir, ['events', 'get', 'shop', id]);
      assert.equal(r.code, 1);
      assert.match(r.stderr, new RegExp(`^error: no merged record for id "${id}" in data set shop: it was deleted by deletion request ${forgot.request_id} \\(identities forget, \\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z\\)\\n$`));
    }
    const single = await cli(dataDir, ['events', 'get', 'shop', 'single-event-0001']);
    assert.match(single.stderr, new RegExp(`it was deleted by deletion request ${deleted.request_id} \\(events delete, `));
    const never = await cli(dataDir, ['events', 'get', 'shop', 'never-sent-0001']);
    assert.equal(never.stderr, 'error: no merged record for id "never-sent-0001" in data set shop (not sent, not consumed yet, or expired by the view retention)\n');
    assert.equal((await cli(dataDir, ['events', 'get', 'shop', 'kept-event-0001'])).code, 0);
    if (TEST_PROFILE === 'sqlite') {
      const files = ['lifecycle.db', 'lifecycle.db-wal'].map((f) => join(dataDir, 'production', f)).filter((f) => existsSync(f));
      for (const file of files) for (const id of ['forgotten-event-0001', 'single-event-0001']) assert.ok(!readFileSync(file).includes(id), `${id} is not in ${file} in clear`);
    }
  } finally {
    assert.equal(await server.stop(), 0);
  }
});
