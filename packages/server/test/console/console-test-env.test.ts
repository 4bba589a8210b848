/**
 * The console of the test environment (each event a sender sends shows up with its outcome) and
 * access with the admin token: the login form, the session cookie and its attributes.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { provision, startServer, tempDataDir } from '../helpers/server-process.js';
import { postSigned, sampleEvent } from '../helpers/https-client.js';
import { chromiumSkip, eventually, eventuallyEqual, launchBrowser, openPage, screenshot } from './browser.js';

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
    const res = await postSigned(server.port, server.ca, creds, 'acme-web', JSON.stringify({ events: [good, bad] }));
    assert.equal(res.status, 207, res.text);
    await eventuallyEqual('two rows', () => page.locator('[data-testid="test-event-row"]').count(), 2);
    const accepted = page.locator(`[data-testid="test-event-row"][data-event-id="${good.id as string}"]`);
    const rejected = page.locator(`[data-testid="test-event-row"][data-event-id="${bad.id as string}"]`);
    assert.match((await accepted.textContent()) ?? '', /accepted/);
    assert.match((await rejected.textContent()) ?? '', /rejected.*missing required field: timestamp/);
    assert.equal(await rejected.locator('button').count(), 0, 'a rejected event is never shown');

    // The accepted event as queued: hashed identifiers shown, other plain-text identifiers masked.
    await accepted.locator('button').click();
    const shown = (await page.locator('tr.detail:not([hidden]) pre').textContent()) ?? '';
    assert.ok(shown.includes(good.id as string) && shown.includes(HASH), shown);
    assert.ok(!shown.includes('203.0.113.7') && !shown.includes('Mozilla/5.0'), 'IP address and user agent masked');

    // More events arrive at the top, without a reload.
    const more = [sampleEvent('acme-web', { event_type: 'page_view', value: undefined, currency_code: undefined }), sampleEvent('acme-web')];
    assert.equal((await postSigned(server.port, server.ca, creds, 'acme-web', JSON.stringify({ events: more }))).status, 200);
    await eventuallyEqual('four rows', () => page.locator('[data-testid="test-event-row"]').count(), 4);
    assert.match((await page.locator('[data-testid="test-event-row"]').first().textContent()) ?? '', new RegExp(more[1]!.id as string));
    await screenshot(page, 'test-events');
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
