#!/usr/bin/env node
/**
 * Regenerates the console screenshots of docs/guides/operator.md (docs/images/console-overview.png and
 * docs/images/console-test-environment.png) from a real run: two real `ecapi-ingest serve` processes
 * (production and `--env test`) in throwaway data dirs, about two minutes of varied signed traffic over
 * TLS (accepted single events and batches, rejected events, 429s from a data set held to 1 request/s),
 * then headless Chromium (/usr/bin/chromium via playwright-core) at 1440x1000.
 *
 * Not a test (never run by `npm test`). Needs a build first:
 *   npm run build && node packages/server/scripts/console-screenshots.mjs [--seconds 120] [--out docs/images]
 *
 * Only made-up data: identifiers are SHA-256 digests of nothing real, or plain fake values the test
 * environment masks (the script checks none of them reaches the page before taking the picture).
 */
import { createHash } from 'node:crypto';
import { mkdirSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { cliJson, provision, startServer, tempDataDir } from '../dist/test/helpers/server-process.js';
import { postSigned, sampleEvent } from '../dist/test/helpers/https-client.js';
import { launchBrowser, openPage } from '../dist/test/console/browser.js';

const { values } = parseArgs({ options: { seconds: { type: 'string', default: '120' }, out: { type: 'string' } } });
const seconds = Number(values.seconds);
const out = resolve(values.out ?? fileURLToPath(new URL('../../../docs/images/', import.meta.url)));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const digest = (s) => createHash('sha256').update(s).digest('hex');
const pick = (list) => list[Math.floor(Math.random() * list.length)];
const TYPES = ['purchase', 'purchase', 'page_view', 'page_view', 'page_view', 'add_to_cart', 'generate_lead', 'sign_up'];
// Plain values that must never reach a page (the test environment masks them; production never shows payloads).
const PLAIN = ['pat.sample@example.com', '203.0.113.42', 'sk-demo-NOT-A-SECRET'];

function goodEvent(dataSet) {
  const type = pick(TYPES);
  const money = type === 'purchase' ? {} : { value: undefined, currency_code: undefined };
  const ids = Math.random() < 0.6 ? { email_address: [digest(`person-${Math.floor(Math.random() * 500)}`)] } : {};
  const phone = Math.random() < 0.25 ? { phone_numbers: [digest(`phone-${Math.floor(Math.random() * 500)}`)] } : {};
  return sampleEvent(dataSet, { event_type: type, ...money, user_data: { ...ids, ...phone, event_ip_address: PLAIN[1], event_user_agent: 'Mozilla/5.0' } });
}

function badEvent(dataSet) {
  return pick([
    () => sampleEvent(dataSet, { timestamp: undefined }),
    () => sampleEvent(dataSet, { event_type: 'no_such_type' }),
    () => sampleEvent(dataSet, { user_data: { email_address: [PLAIN[0]] } }),
    () => sampleEvent(dataSet, { currency_code: 'dollars' }),
    () => sampleEvent(dataSet, { event_type: 'generate_lead', value: undefined, currency_code: undefined, ext: { api_secret: PLAIN[2] } }),
  ])();
}

/** Sends varied traffic while `going()`: batches with some rejected events, single events, and (production) a throttled data set. */
async function traffic(server, creds, tight, going) {
  const stats = {};
  const count = (status) => (stats[status] = (stats[status] ?? 0) + 1);
  const started = Date.now();
  while (going()) {
    // A slow wave so the charts show shape, not a flat line.
    const phase = Math.sin(((Date.now() - started) / 40_000) * 2 * Math.PI);
    const size = Math.max(1, Math.round(6 + 5 * phase + Math.random() * 4));
    const events = Array.from({ length: size }, () => (Math.random() < 0.08 ? badEvent('acme-web') : goodEvent('acme-web')));
    count((await postSigned(server.port, server.ca, creds, 'acme-web', JSON.stringify({ events }))).status);
    if (Math.random() < 0.5) count((await postSigned(server.port, server.ca, creds, 'acme-web', JSON.stringify(goodEvent('acme-web')))).status);
    if (Math.random() < 0.05) count((await postSigned(server.port, server.ca, creds, 'acme-web', JSON.stringify(badEvent('acme-web')))).status);
    if (tight && Math.random() < 0.2) {
      for (let i = 0; i < 2; i++) count((await postSigned(server.port, server.ca, tight, 'tight', JSON.stringify(goodEvent('tight')))).status);
    }
    await sleep(Math.max(20, 120 - 60 * phase));
  }
  return stats;
}

async function noPlainValues(page, where) {
  const html = await page.content();
  for (const plain of PLAIN) if (html.includes(plain)) throw new Error(`${where}: ${plain} is on the page`);
}

mkdirSync(out, { recursive: true });
const prodDir = tempDataDir('ecapi-shots-');
const testDir = tempDataDir('ecapi-shots-test-');
const prodCreds = await provision(prodDir, ['acme-web']);
const tight = await provision(prodDir, ['tight']);
await cliJson(prodDir, ['data-set', 'limits', 'tight', '--rps', '1', '--burst-rps', '1', '--burst-seconds', '1']);
const testCreds = await provision(testDir, ['acme-web'], 'test');
const browser = await launchBrowser();
const prod = await startServer({ dataDir: prodDir, args: ['--workers', '1'] });
const testEnv = await startServer({ dataDir: testDir, env: 'test', args: ['--workers', '1'] });
let going = true;
try {
  process.stdout.write(`sending ${seconds} s of traffic to production (admin ${prod.adminPort}) and test (admin ${testEnv.adminPort})\n`);
  // The traffic goes on while the pictures are taken, so the live cards (last 10 s) show it.
  const sent = Promise.all([traffic(prod, prodCreds, tight, () => going), traffic(testEnv, testCreds, undefined, () => going)]);
  await sleep(seconds * 1000);

  // Overview: a 5-minute chart window, taken while the last seconds' figures are still live.
  const { page, problems } = await openPage(browser);
  await page.goto(`http://127.0.0.1:${prod.adminPort}/console/`);
  await page.locator('[data-testid="ready-pill"]', { hasText: 'Ready' }).waitFor();
  await page.click('[data-testid="window-5m"]');
  await page.locator('[data-testid="card-free-space"]').waitFor();
  await sleep(2500);
  // uPlot writes the date on the first tick: when that tick is a :30 its wide label runs into the
  // next minute's, so take the picture in the second half of a minute (first tick on a :00).
  while (new Date().getUTCSeconds() < 32 || new Date().getUTCSeconds() > 56) await sleep(500);
  await sleep(2100); // one refresh after the wait
  await noPlainValues(page, 'overview');
  await page.screenshot({ path: join(out, 'console-overview.png') });

  // Test environment: a rejected event open in the detail pane (its error and masked payload).
  const { page: testPage, problems: testProblems } = await openPage(browser);
  await testPage.goto(`http://127.0.0.1:${testEnv.adminPort}/console/#/test-events`);
  const rejected = testPage.locator('[data-testid="test-event-row"][data-outcome="rejected"]');
  await rejected.first().waitFor();
  // Prefer, among the rows on the first screen, one whose payload shows the masking (a plain email where
  // a digest belongs); a row further down would scroll the page under the header.
  const rows = Math.min(await rejected.count(), 5);
  let chosen = rejected.first();
  for (let i = 0; i < rows; i++) {
    if (/hashed|sha-?256|digest/i.test((await rejected.nth(i).textContent()) ?? '')) { chosen = rejected.nth(i); break; }
  }
  await chosen.click();
  await testPage.locator('[data-testid="test-event-error"]').waitFor();
  await testPage.locator('html').evaluate((root) => root.ownerDocument.defaultView?.scrollTo(0, 0));
  await noPlainValues(testPage, 'test environment');
  await testPage.screenshot({ path: join(out, 'console-test-environment.png') });
  going = false;
  const [prodStats, testStats] = await sent;
  process.stdout.write(`production statuses ${JSON.stringify(prodStats)}; test ${JSON.stringify(testStats)}\n`);
  const all = [...problems, ...testProblems];
  if (all.length) throw new Error(`the console reported problems: ${all.join('; ')}`);
  process.stdout.write(`wrote ${join(out, 'console-overview.png')} and ${join(out, 'console-test-environment.png')}\n`);
} finally {
  going = false;
  await browser.close();
  await prod.stop();
  await testEnv.stop();
  rmSync(prodDir, { recursive: true, force: true });
  rmSync(testDir, { recursive: true, force: true });
}
