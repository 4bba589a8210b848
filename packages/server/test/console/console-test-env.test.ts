/**
 * The console of the test environment (each event a sender sends shows up with its outcome) and
 * access with the admin token: the login form, the session cookie and its attributes.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { provision, startServer, tempDataDir } from '../helpers/server-process.js';
import { postSigned, request, sampleEvent } from '../helpers/https-client.js';
import { chromiumSkip, eventually, eventuallyEqual, launchBrowser, lineCounts, noSidewaysScroll, openPage, screenshot, shownWhole } from './browser.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const skip = chromiumSkip();
const HASH = '7c8d08bf0d2dd2b8a6b3f1c0ffb0e5a94c1ddc2fe93c1bd0e8fa4e1470ba125e';

test('test environment: the last events received fill in with their per-event outcome', { timeout: 120_000, skip }, async () => {
  const dataDir = tempDataDir('ecapi-console-');
  const creds = await provision(dataDir, ['acme-web'], 'test');
  // The browser first: a launch that fails must not leave a server running (the file would never end).
  const browser = await launchBrowser();
  const server = await startServer({ dataDir, env: 'test', args: ['--workers', '1', '--no-worker'] });
  try {
    const { page, problems } = await openPage(browser);
    await page.goto(`http://127.0.0.1:${server.adminPort}/console/#/test-events`);
    await page.locator('[data-testid="test-events-empty"]').waitFor();
    assert.equal(await page.locator('#env').textContent(), 'test');

    const good = sampleEvent('acme-web', { user_data: { phone_numbers: [HASH], event_ip_address: '203.0.113.7', event_user_agent: 'Mozilla/5.0' } });
    const bad = sampleEvent('acme-web', { timestamp: undefined });
    // Rejected as received, so never policy-checked: a plain email where a digest belongs, an unknown
    // field whose name is an address, a secret under ext, an email in a free-text field.
    const leaky = sampleEvent('acme-web', {
      event_type: 'generate_lead',
      user_data: { email_address: ['mary.leak@example.com'], phone_numbers: [15551234567] },
      'joe.leak@example.com': 'x',
      ext: { api_secret: 'sk-live-SECRET-1234' },
      properties: { lead_source: 'form by ann.leak@example.com' },
    });
    const res = await postSigned(server.port, server.ca, creds, 'acme-web', JSON.stringify({ events: [good, bad, leaky] }));
    assert.equal(res.status, 207, res.text);
    await eventuallyEqual('three rows', () => page.locator('[data-testid="test-event-row"]').count(), 3);
    const accepted = page.locator(`[data-testid="test-event-row"][data-event-id="${good.id as string}"]`);
    const rejected = page.locator(`[data-testid="test-event-row"][data-event-id="${bad.id as string}"]`);
    const leakyRow = page.locator(`[data-testid="test-event-row"][data-event-id="${leaky.id as string}"]`);
    assert.match((await accepted.textContent()) ?? '', /accepted/);
    assert.match((await rejected.textContent()) ?? '', /rejected.*missing required field: timestamp/);

    // The accepted event as queued: hashed identifiers shown, other plain-text identifiers masked.
    await accepted.click();
    const shown = (await page.locator('[data-testid="test-event-payload"]').textContent()) ?? '';
    assert.ok(shown.includes(good.id as string) && shown.includes(HASH), shown);
    assert.ok(!shown.includes('203.0.113.7') && !shown.includes('Mozilla/5.0'), 'IP address and user agent masked');

    // A rejected event: its exact error beside its payload as received.
    await rejected.click();
    assert.equal(await page.locator('[data-testid="test-event-error"]').textContent(), 'missing required field: timestamp');
    const rejectedShown = (await page.locator('[data-testid="test-event-payload"]').textContent()) ?? '';
    assert.ok(rejectedShown.includes(bad.id as string) && rejectedShown.includes('"value": 19.99'), rejectedShown);
    await leakyRow.click();
    assert.match((await page.locator('[data-testid="test-event-error"]').textContent()) ?? '', /schema validation failed|hashed field|unknown field/);
    const leakyShown = (await page.locator('[data-testid="test-event-payload"]').textContent()) ?? '';
    assert.ok(leakyShown.includes(leaky.id as string) && leakyShown.includes('‹unknown field 1›') && leakyShown.includes('[redacted-email]'), leakyShown);
    // Never a plain identifier or a secret: not on the page, not in what the API serves.
    const api = await (await fetch(`http://127.0.0.1:${server.adminPort}/api/test-events`)).text();
    for (const secret of ['mary.leak', 'joe.leak', 'ann.leak', '15551234567', 'SECRET-1234', '203.0.113.7']) {
      assert.ok(!api.includes(secret), `${secret} not served`);
      assert.ok(!(await page.content()).includes(secret), `${secret} not on the page`);
    }
    await screenshot(page, 'test-events-rejected');

    // While an event is selected the rows stay put; new events wait behind a button.
    const before = await leakyRow.boundingBox();
    const more = [sampleEvent('acme-web', { event_type: 'page_view', value: undefined, currency_code: undefined }), sampleEvent('acme-web')];
    assert.equal((await postSigned(server.port, server.ca, creds, 'acme-web', JSON.stringify({ events: more }))).status, 200);
    await page.locator('[data-testid="test-events-show-new"]', { hasText: 'Show 2 new events' }).waitFor();
    await sleep(2300);
    assert.equal(await page.locator('[data-testid="test-event-row"]').count(), 3);
    assert.deepEqual(await leakyRow.boundingBox(), before, 'the selected row did not move');
    await page.click('[data-testid="test-events-show-new"]');
    await eventuallyEqual('five rows', () => page.locator('[data-testid="test-event-row"]').count(), 5);
    assert.match((await page.locator('[data-testid="test-event-row"]').first().textContent()) ?? '', new RegExp(more[1]!.id as string));

    // Filters: by outcome, by event type.
    await page.selectOption('[data-testid="test-events-outcome"]', 'rejected');
    assert.deepEqual(await page.locator('[data-testid="test-event-row"]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-outcome'))), ['rejected', 'rejected']);
    await page.selectOption('[data-testid="test-events-outcome"]', 'all');
    await page.selectOption('[data-testid="test-events-type"]', 'page_view');
    assert.deepEqual(await page.locator('[data-testid="test-event-row"]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-event-id'))), [more[0]!.id]);
    await page.selectOption('[data-testid="test-events-type"]', '');

    // Paused (nothing selected): new events wait too; resuming lets them in at the top.
    await leakyRow.click(); // deselect
    await page.click('[data-testid="test-events-pause"]');
    const last = sampleEvent('acme-web');
    assert.equal((await postSigned(server.port, server.ca, creds, 'acme-web', JSON.stringify(last))).status, 200);
    await page.locator('[data-testid="test-events-show-new"]', { hasText: 'Show 1 new event' }).waitFor();
    assert.equal(await page.locator('[data-testid="test-event-row"]').count(), 5);
    await page.click('[data-testid="test-events-pause"]');
    await eventuallyEqual('six rows', () => page.locator('[data-testid="test-event-row"]').count(), 6);
    assert.match((await page.locator('[data-testid="test-event-row"]').first().textContent()) ?? '', new RegExp(last.id as string));
    await accepted.click();
    await page.setViewportSize({ width: 390, height: 844 });
    await noSidewaysScroll(page, 'test environment');
    for (const selector of ['[data-testid="test-event-row"] td:first-child', '[data-testid="test-event-detail"] dd code']) {
      const lines = await lineCounts(page, selector);
      assert.ok(lines.length > 0 && lines.every((n) => n === 1), `${selector} on one line at 390 px: ${JSON.stringify(lines)}`);
    }
    await screenshot(page, 'test-events-390');
    await page.setViewportSize({ width: 1440, height: 1000 });
    await screenshot(page, 'test-events');
    assert.deepEqual(problems, []);
  } finally {
    await browser.close();
    assert.equal(await server.stop(), 0);
  }
});

test('test environment: requests refused as a whole show in the list with their reason, also at 390 px', { timeout: 120_000, skip }, async () => {
  const dataDir = tempDataDir('ecapi-console-');
  const creds = await provision(dataDir, ['acme-web'], 'test');
  const browser = await launchBrowser();
  const server = await startServer({ dataDir, env: 'test' });
  try {
    const { page, problems } = await openPage(browser);
    await page.goto(`http://127.0.0.1:${server.adminPort}/console/#/test-events`);
    await page.locator('[data-testid="test-events-empty"]').waitFor();

    const good = sampleEvent('acme-web');
    assert.equal((await postSigned(server.port, server.ca, creds, 'acme-web', JSON.stringify(good))).status, 200);
    const badSig = await request(server.port, server.ca, {
      body: JSON.stringify(sampleEvent('acme-web')),
      headers: { 'content-type': 'application/json', 'x-service-key-id': creds.keyId, 'x-service-data-set': 'acme-web', 'x-service-signature': 'c'.repeat(64) },
    });
    assert.equal(badSig.status, 401);
    const invalid = await postSigned(server.port, server.ca, creds, 'acme-web', '{"events": [');
    assert.equal(invalid.status, 400);
    const wrongType = await postSigned(server.port, server.ca, creds, 'acme-web', JSON.stringify(sampleEvent('acme-web', { user_data: { email_address: ['liz.ct@example.com'] } })), { headers: { 'content-type': 'text/plain' } });
    assert.equal(wrongType.status, 400);

    const failedRows = page.locator('[data-testid="test-event-row"][data-outcome="failed"]');
    await eventuallyEqual('three refused requests', () => failedRows.count(), 3);
    await eventuallyEqual('four rows', () => page.locator('[data-testid="test-event-row"]').count(), 4);
    const row = (res: { headers: Record<string, unknown> }) => page.locator(`[data-testid="test-event-row"][data-request-id="${res.headers['x-request-id'] as string}"]`);
    for (const [res, status] of [[badSig, 401], [invalid, 400], [wrongType, 400]] as const) {
      const text = (await row(res).textContent()) ?? '';
      assert.ok(text.includes(`failed ${status}`) && text.includes(res.json().error as string), `${text} shows the status and the message as sent`);
    }
    // The bad signature: the message, the headers with the signature redacted, no body.
    await row(badSig).click();
    assert.equal(await page.locator('[data-testid="test-event-error"]').textContent(), badSig.json().error);
    const headers = (await page.locator('[data-testid="test-event-headers"]').textContent()) ?? '';
    assert.match(headers, /x-service-signature: ‹redacted: 64 characters›/);
    assert.ok(!headers.includes('c'.repeat(64)), 'the signature is not shown');
    assert.match((await page.locator('[data-testid="test-event-payload"]').textContent()) ?? '', /did not authenticate/);
    // The wrong Content-Type, signed: its body masked.
    await row(wrongType).click();
    const body = (await page.locator('[data-testid="test-event-payload"]').textContent()) ?? '';
    assert.ok(body.includes('"event_type": "purchase"') && !body.includes('liz.ct'), body);
    assert.ok(!(await page.content()).includes('liz.ct'), 'the email is not on the page');
    await screenshot(page, 'test-events-failed');
    // The filter of refused requests.
    await row(wrongType).click(); // deselect
    await page.selectOption('[data-testid="test-events-outcome"]', 'failed');
    assert.deepEqual(new Set(await page.locator('[data-testid="test-event-row"]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-outcome')))), new Set(['failed']));
    await page.selectOption('[data-testid="test-events-outcome"]', 'all');

    // 390 px: every row's outcome, error, event id and data set in sight, not only time and outcome.
    await page.setViewportSize({ width: 390, height: 844 });
    await noSidewaysScroll(page, 'test environment');
    // By position, as the columns are: time, outcome (and error), event_type or request, event id, data set.
    for (const [n, label] of ['time', 'outcome', 'event_type or request', 'event id', 'data set'].entries()) {
      assert.equal(await shownWhole(page, `[data-testid="test-event-row"] td:nth-child(${n + 1})`, `test events: ${label}`), 4);
    }
    await shownWhole(page, '[data-testid="test-event-row"] .error', 'test events: errors');
    await screenshot(page, 'test-events-failed-390');
    assert.deepEqual(problems, []);
  } finally {
    await browser.close();
    assert.equal(await server.stop(), 0);
  }
});

test('with an admin token: login form once, then an HttpOnly Secure SameSite=Strict session cookie', { timeout: 120_000, skip }, async () => {
  const token = `adm-${randomBytes(24).toString('hex')}`;
  // The browser first: a launch that fails must not leave a server running (the file would never end).
  const browser = await launchBrowser();
  const server = await startServer({ dataDir: tempDataDir('ecapi-console-'), args: ['--workers', '1', '--no-worker'], extraEnv: { ECAPI_ADMIN_TOKEN: token } });
  const admin = `http://127.0.0.1:${server.adminPort}`;
  try {
    // The API needs the token (or a session); the static shell carries no data.
    assert.equal((await fetch(`${admin}/api/overview`)).status, 401);
    assert.equal((await fetch(`${admin}/console/`)).status, 200);
    const { page, problems } = await openPage(browser);
    await page.goto(`${admin}/console/`);
    await page.locator('[data-testid="login-form"]').waitFor();
    await screenshot(page, 'login');
    await page.fill('[data-testid="login-token"]', 'wrong');
    await page.click('[data-testid="login-submit"]');
    await eventually('refusal', async () => ((await page.locator('[data-testid="login-error"]').textContent()) ?? '').includes('refused'));
    await page.fill('[data-testid="login-token"]', token);
    await page.click('[data-testid="login-submit"]');
    await page.locator('[data-testid="ready-pill"]').waitFor();

    const cookies = await page.context().cookies();
    const session = cookies.find((c) => c.name === 'ecapi_admin');
    assert.ok(session, 'session cookie set');
    assert.equal(session.httpOnly, true);
    assert.equal(session.secure, true);
    assert.equal(session.sameSite, 'Strict');
    assert.equal(session.path, '/');
    assert.ok(!session.value.includes(token) && session.value.length >= 40, 'an opaque id, not the token');
    assert.equal(await page.evaluate('document.cookie'), '', 'not readable from scripts');
    // The cookie works for the API (and so does the bearer header); another id does not.
    assert.equal((await fetch(`${admin}/api/overview`, { headers: { cookie: `ecapi_admin=${session.value}` } })).status, 200);
    assert.equal((await fetch(`${admin}/metrics`, { headers: { cookie: `ecapi_admin=${session.value}` } })).status, 200);
    assert.equal((await fetch(`${admin}/api/overview`, { headers: { cookie: `ecapi_admin=${session.value}x` } })).status, 401);
    assert.equal((await fetch(`${admin}/api/overview`, { headers: { authorization: `Bearer ${token}` } })).status, 200);

    // Navigating keeps the session; signing out ends it.
    await page.click('nav a[data-nav="data-sets"]');
    await page.locator('[data-testid="data-sets-table"]').waitFor();
    await page.click('#logout');
    await page.locator('[data-testid="login-form"]').waitFor();
    assert.equal((await fetch(`${admin}/api/overview`, { headers: { cookie: `ecapi_admin=${session.value}` } })).status, 401);
    assert.ok(!server.output().includes(token), 'the admin token is never logged');
    assert.deepEqual(problems, []);
  } finally {
    await browser.close();
    assert.equal(await server.stop(), 0);
  }
});
