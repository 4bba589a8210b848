/**
 * A deletion reaches the console's memory (live/console-deletions.ts), black-box against a real
 * `serve` and its worker. In production, a data set's recent rejections (GET /api/data-sets/:id)
 * no longer show an event id once `events delete` names it. In the test environment, signed events
 * show in GET /api/test-events; once `events delete` or `identities forget` is done, the next read of the
 * list no longer shows what the request covers (the event id, the identifier in any hashed field,
 * a rejected event carrying it, the identity's other events), while another event of the same data
 * set stays, nothing deleted comes back later (a serving process reports once a second), and an
 * event sent after the request with the same id is listed again (it is a new event). And the
 * console page left open on the list drops the row, selected and its payload shown, too. On both
 * profiles (ECAPI_TEST_PROFILE=postgres follows the requests in the database's tables).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { cliJson, provision, startServer, tempDataDir, type ServerProcess } from '../helpers/server-process.js';
import { postSigned } from '../helpers/https-client.js';
import { sha } from '../helpers/event-generator.js';
import { waitFor } from '../helpers/fault-tools.js';
import { purchaseEvent } from '../helpers/purchase-event.js';
import { chromiumSkip, eventuallyEqual, launchBrowser, openPage } from '../console/browser.js';

type Entry = Record<string, any>;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function listed(server: ServerProcess): Promise<Entry[]> {
  const res = await fetch(`http://127.0.0.1:${server.adminPort}/api/test-events`);
  assert.equal(res.status, 200);
  return ((await res.json()) as { events: Entry[] }).events;
}

const idsOf = (entries: Entry[]) => entries.map((e) => e.event_id as string | null);

/** Waits until every id is listed (a serving process reports once a second); returns the list. */
const waitListed = (server: ServerProcess, ids: string[]) =>
  waitFor(`${ids.join(', ')} listed`, async () => {
    const entries = await listed(server);
    return ids.every((id) => idsOf(entries).includes(id)) ? entries : undefined;
  }, 20_000);

/** The test environment's consumer has applied everything queued: a forget resolves the identity in the view. */
const caughtUp = (dataDir: string) =>
  waitFor('the consumer to catch up', async () => {
    const s = await cliJson(dataDir, ['worker', 'status'], 'test');
    return s.lag_records === 0 && s.queue_last_seq > 0 ? s : undefined;
  }, 30_000);

/** A data set's recent rejections as the console reads them (production: the admin port needs no token on loopback). */
async function recentRejections(server: ServerProcess, dataSetId: string): Promise<(string | null)[]> {
  const res = await fetch(`http://127.0.0.1:${server.adminPort}/api/data-sets/${dataSetId}`);
  assert.equal(res.status, 200);
  return ((await res.json()) as { live: { recent_rejections: { event_id: string | null }[] } }).live.recent_rejections.map((r) => r.event_id);
}

test('production: events delete takes the event id out of the data set\'s recent rejections; another rejection stays, nothing comes back', { timeout: 120_000 }, async () => {
  const dataDir = tempDataDir('ecapi-console-deletion-');
  const creds = await provision(dataDir, ['shop']);
  const server = await startServer({ dataDir });
  const rnd = randomBytes(6).toString('hex');
  const gone = `rejected-gone-${rnd}`;
  const kept = `rejected-kept-${rnd}`;
  try {
    const res = await postSigned(server.port, server.ca, creds, 'shop', JSON.stringify({
      events: [purchaseEvent('shop', gone, {}, { event_type: 'not-a-type' }), purchaseEvent('shop', kept, {}, { event_type: 'not-a-type' }), purchaseEvent('shop', `accepted-${rnd}`)],
    }));
    assert.equal(res.status, 207, res.text);
    await waitFor('both rejections shown', async () => {
      const ids = await recentRejections(server, 'shop');
      return ids.includes(gone) && ids.includes(kept) ? ids : undefined;
    }, 20_000);

    const done = await cliJson(dataDir, ['events', 'delete', 'shop', gone]);
    assert.equal(done.state, 'done');
    // At once: the read follows the requests recorded before it.
    const after = await recentRejections(server, 'shop');
    assert.ok(!after.includes(gone), `the deleted event's id is not shown: ${JSON.stringify(after)}`);
    assert.ok(after.includes(kept), 'the other rejection stays');
    await sleep(2_500);
    const later = await recentRejections(server, 'shop');
    assert.ok(!later.includes(gone), 'nothing comes back from the next reports');
    assert.ok(later.includes(kept));
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

test('test environment: events delete takes the event out of the list of test events; another event of the data set stays', { timeout: 120_000 }, async () => {
  const dataDir = tempDataDir('ecapi-console-deletion-');
  const creds = await provision(dataDir, ['shop'], 'test');
  const server = await startServer({ dataDir, env: 'test' });
  const rnd = randomBytes(6).toString('hex');
  const gone = `gone-${rnd}`;
  const kept = `kept-${rnd}`;
  try {
    const post = async (body: unknown, status = 200) => assert.equal((await postSigned(server.port, server.ca, creds, 'shop', JSON.stringify(body))).status, status);
    await post({ events: [purchaseEvent('shop', gone, { email_address: [sha(`gone-${rnd}@example.com`)] }, { properties: { note: `only-in-${gone}` } }), purchaseEvent('shop', kept, { email_address: [sha(`kept-${rnd}@example.com`)] })] });
    await waitListed(server, [gone, kept]);

    const done = await cliJson(dataDir, ['events', 'delete', 'shop', gone], 'test');
    assert.equal(done.state, 'done');
    assert.equal(done.result.view_records, 1);

    // At once: the read follows the requests recorded before it.
    const after = await listed(server);
    assert.ok(!idsOf(after).includes(gone), `the deleted event is not listed: ${JSON.stringify(after)}`);
    assert.ok(!JSON.stringify(after).includes(gone), 'no byte of it: not its id, not its properties');
    assert.ok(idsOf(after).includes(kept), 'the other event of the data set stays');

    // Nothing comes back from a serving process's next reports.
    await sleep(2_500);
    const later = await listed(server);
    assert.ok(!JSON.stringify(later).includes(gone));
    assert.ok(idsOf(later).includes(kept));

    // The same id sent after the request is a new event: it is listed again.
    await post(purchaseEvent('shop', gone, {}, { properties: { note: 'sent after the deletion' } }));
    const again = await waitListed(server, [gone]);
    const resent = again.filter((e) => e.event_id === gone);
    assert.equal(resent.length, 1);
    assert.equal(resent[0]!.event.properties.note, 'sent after the deletion');
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

test('test environment: identities forget --identifier takes out the events carrying it (any hashed field, rejected ones too) and, once done, the rest of the identity', { timeout: 120_000 }, async () => {
  const dataDir = tempDataDir('ecapi-console-deletion-');
  const creds = await provision(dataDir, ['shop'], 'test');
  // Primary and one worker: the primary's admin port follows the requests.
  const server = await startServer({ dataDir, env: 'test', args: ['--workers', '1'] });
  const rnd = randomBytes(6).toString('hex');
  const A = sha(`forget-me-${rnd}@example.com`);
  const P = sha(`+1555${rnd}`);
  const B = sha(`keep-me-${rnd}@example.com`);
  const ids = {
    byEmail: `a-email-${rnd}`,
    withPhone: `a-phone-${rnd}`,
    asCustomerId: `a-cid-${rnd}`,
    rejected: `a-rejected-${rnd}`,
    // Carries only the phone, linked to the person's identity by `withPhone`: only the worker knows it is theirs.
    linked: `p-only-${rnd}`,
    kept: `b-kept-${rnd}`,
  };
  try {
    const post = async (body: unknown, status: number) => {
      const res = await postSigned(server.port, server.ca, creds, 'shop', JSON.stringify(body));
      assert.equal(res.status, status, res.text);
    };
    await post({
      events: [
        purchaseEvent('shop', ids.byEmail, { email_address: [A] }),
        purchaseEvent('shop', ids.withPhone, { email_address: [A], phone_numbers: [P] }),
        purchaseEvent('shop', ids.asCustomerId, { customer_identifier: A }),
        purchaseEvent('shop', ids.linked, { phone_numbers: [P] }),
        purchaseEvent('shop', ids.kept, { email_address: [B] }),
      ],
    }, 200);
    // Rejected (an event type ECAPI does not know), with the person's digest in its user data.
    await post(purchaseEvent('shop', ids.rejected, { email_address: [A] }, { event_type: 'not-a-type' }), 400);
    const before = await waitListed(server, Object.values(ids));
    assert.equal(before.find((e) => e.event_id === ids.rejected)?.outcome, 'rejected');
    assert.ok(JSON.stringify(before).includes(A), 'the digest is shown before the deletion');
    await caughtUp(dataDir);

    const done = await cliJson(dataDir, ['identities', 'forget', 'shop', '--identifier', `email:${A}`], 'test');
    assert.equal(done.state, 'done');
    assert.equal(done.result.view_records, 4, JSON.stringify(done));

    const after = await listed(server);
    const text = JSON.stringify(after);
    for (const [what, id] of Object.entries(ids)) {
      if (what === 'kept') continue;
      assert.ok(!idsOf(after).includes(id), `${what} (${id}) is not listed: ${text}`);
    }
    assert.ok(!text.includes(A) && !text.includes(P), 'neither digest of the person is served');
    assert.ok(idsOf(after).includes(ids.kept), 'the other person\'s event of the data set stays');

    await sleep(2_500);
    const later = await listed(server);
    assert.ok(!JSON.stringify(later).includes(A));
    assert.ok(!JSON.stringify(later).includes(ids.linked));
    assert.ok(idsOf(later).includes(ids.kept));
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

test('test environment: identities forget --identity-key takes out the events of the records the worker deleted', { timeout: 120_000 }, async () => {
  const dataDir = tempDataDir('ecapi-console-deletion-');
  const creds = await provision(dataDir, ['shop'], 'test');
  const server = await startServer({ dataDir, env: 'test' });
  const rnd = randomBytes(6).toString('hex');
  const C = sha(`by-key-${rnd}@example.com`);
  const gone = [`c-1-${rnd}`, `c-2-${rnd}`];
  const kept = `d-kept-${rnd}`;
  try {
    const res = await postSigned(server.port, server.ca, creds, 'shop', JSON.stringify({
      events: [purchaseEvent('shop', gone[0]!, { email_address: [C] }), purchaseEvent('shop', gone[1]!, { email_address: [C] }), purchaseEvent('shop', kept, { email_address: [sha(`d-${rnd}`)] })],
    }));
    assert.equal(res.status, 200, res.text);
    await waitListed(server, [...gone, kept]);
    await caughtUp(dataDir);
    const identity = await cliJson(dataDir, ['identities', 'get', 'shop', '--identifier', `email:${C}`], 'test');

    const done = await cliJson(dataDir, ['identities', 'forget', 'shop', '--identity-key', identity.identity_key], 'test');
    assert.equal(done.state, 'done');
    assert.equal(done.result.view_records, 2);

    const after = await listed(server);
    for (const id of gone) assert.ok(!idsOf(after).includes(id), `${id} is not listed`);
    assert.ok(!JSON.stringify(after).includes(C));
    assert.ok(idsOf(after).includes(kept));
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

test('test environment: an open console page drops the deleted event\'s row, also the one selected', { timeout: 120_000, skip: chromiumSkip() }, async () => {
  const dataDir = tempDataDir('ecapi-console-deletion-');
  const creds = await provision(dataDir, ['shop'], 'test');
  // The browser first: a launch that fails must not leave a server running.
  const browser = await launchBrowser();
  const server = await startServer({ dataDir, env: 'test' });
  const rnd = randomBytes(6).toString('hex');
  const gone = `gone-${rnd}`;
  const kept = `kept-${rnd}`;
  try {
    const { page, problems } = await openPage(browser);
    await page.goto(`http://127.0.0.1:${server.adminPort}/console/#/test-events`);
    const res = await postSigned(server.port, server.ca, creds, 'shop', JSON.stringify({ events: [purchaseEvent('shop', gone, {}, { properties: { note: `only-in-${gone}` } }), purchaseEvent('shop', kept)] }));
    assert.equal(res.status, 200, res.text);
    const row = (id: string) => page.locator(`[data-testid="test-event-row"][data-event-id="${id}"]`);
    await eventuallyEqual('two rows', () => page.locator('[data-testid="test-event-row"]').count(), 2);
    await row(gone).click();
    assert.match((await page.locator('[data-testid="test-event-payload"]').textContent()) ?? '', new RegExp(`only-in-${gone}`));

    assert.equal((await cliJson(dataDir, ['events', 'delete', 'shop', gone], 'test')).state, 'done');
    await eventuallyEqual('the deleted row gone', () => row(gone).count(), 0);
    assert.equal(await row(kept).count(), 1, 'the other row stays');
    assert.ok(!(await page.content()).includes(gone), 'nothing of it on the page: not its row, not its payload');
    assert.deepEqual(problems, []);
  } finally {
    await browser.close();
    assert.equal(await server.stop(), 0);
  }
});
