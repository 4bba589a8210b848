/**
 * Headless Chromium for the console's end-to-end tests: Debian's `chromium` package driven by
 * playwright-core (no browser download). Where /usr/bin/chromium is missing the tests fail in CI
 * (CI set) and are skipped locally with a message.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chromium, type Browser, type Page } from 'playwright-core';

export const CHROMIUM = process.env.ECAPI_CHROMIUM ?? '/usr/bin/chromium';
/** packages/server/test-output/screenshots (test-output/ is ignored by git). */
export const SCREENSHOTS = fileURLToPath(new URL('../../../test-output/screenshots/', import.meta.url));

const inCi = Boolean(process.env.CI) && process.env.CI !== 'false' && process.env.CI !== '0';

/** The `skip` option for the console tests: false when Chromium is there. */
export function chromiumSkip(): false | string {
  if (existsSync(CHROMIUM)) return false;
  const message = `${CHROMIUM} not found: apt-get install -y chromium (.ci/run does this)`;
  if (inCi) {
    test('Chromium is installed for the console tests', () => assert.fail(message));
    return false;
  }
  process.stderr.write(`console tests skipped: ${message}\n`);
  return message;
}

export async function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/** A page that fails the test on any console error or failed request (a CDN reference would show here). */
export async function openPage(browser: Browser): Promise<{ page: Page; problems: string[] }> {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 }, locale: 'en-US', timezoneId: 'UTC' });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error' && !/401 \(Unauthorized\)/.test(message.text())) problems.push(`console error: ${message.text()}`);
  });
  page.on('requestfailed', (request) => problems.push(`request failed: ${request.url()}`));
  page.on('request', (request) => {
    const url = new URL(request.url());
    if (url.hostname !== '127.0.0.1') problems.push(`request to another origin: ${request.url()}`);
  });
  return { page, problems };
}

/** A screenshot from the top of the page (a sticky header scrolled along would show mid-page); the whole page unless `fullPage: false`. */
export async function screenshot(page: Page, name: string, options: { fullPage?: boolean } = {}): Promise<string> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const file = join(SCREENSHOTS, `${name}.png`);
  await page.locator('html').evaluate((root) => root.ownerDocument.defaultView?.scrollTo(0, 0));
  await page.screenshot({ path: file, fullPage: options.fullPage ?? true });
  return file;
}

/** Polls `check` until it returns a truthy value (or throws the last failure after `timeoutMs`). */
export async function eventually<T>(what: string, check: () => Promise<T | undefined | null | false>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The number shown on a card (`data-testid="card-<id>"`), or null for "–". */
export async function cardNumber(page: Page, id: string): Promise<number | null> {
  const text = (await page.locator(`[data-testid="card-${id}"] .value`).textContent({ timeout: 5000 })) ?? '';
  const match = /-?[\d,]+(?:\.\d+)?/.exec(text);
  return match ? Number(match[0].replace(/,/g, '')) : null;
}

/** Polls `get` until it returns `expected`; the failure names the last value seen. */
export async function eventuallyEqual<T>(what: string, get: () => Promise<T>, expected: T, timeoutMs = 20_000): Promise<void> {
  let last: T | undefined;
  try {
    await eventually(what, async () => {
      last = await get();
      return last === expected;
    }, timeoutMs);
  } catch {
    assert.fail(`${what}: expected ${String(expected)}, last saw ${String(last)}`);
  }
}

/** For each element matching `selector`, how many lines its text takes (1: not wrapped). */
export async function lineCounts(page: Page, selector: string): Promise<number[]> {
  return page.locator(selector).evaluateAll((elements) =>
    elements.map((el) => {
      const range = el.ownerDocument.createRange();
      range.selectNodeContents(el);
      return new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top))).size;
    }),
  );
}

/**
 * lineCounts once every element of `selector` is drawn (at least one line each): the console redraws
 * its cards on each refresh, and an element read mid-redraw (empty) is not a wrapped one.
 */
export async function drawnLineCounts(page: Page, selector: string): Promise<number[]> {
  return eventually(`${selector} drawn`, async () => {
    const lines = await lineCounts(page, selector);
    return lines.length > 0 && lines.every((n) => n > 0) ? lines : undefined;
  });
}

/** The page does not scroll sideways: nothing is wider than the viewport. */
export async function noSidewaysScroll(page: Page, what: string): Promise<void> {
  const { scrollWidth, clientWidth } = await page.locator('html').evaluate((root) => ({ scrollWidth: root.scrollWidth, clientWidth: root.clientWidth }));
  assert.ok(scrollWidth <= clientWidth, `${what}: page ${scrollWidth} px wide in a ${clientWidth} px viewport`);
}

/**
 * Every element matching `selector` is shown whole on a narrow screen: it has a box, every line of
 * its text lies inside the viewport, it is not clipped (scrollWidth <= clientWidth for block boxes),
 * and no scrolling container around it hides part of it sideways. Returns how many were checked.
 */
export async function shownWhole(page: Page, selector: string, what: string): Promise<number> {
  // The console redraws its tables every second: elements found just before a redraw are detached
  // (no box) by the time they are measured. Such a reading is taken again, not counted as a problem.
  for (let attempt = 1; ; attempt++) {
    const problems = await measureShownWhole(page, selector);
    if (problems.detached && attempt < 10) {
      await new Promise((r) => setTimeout(r, 100));
      continue;
    }
    assert.ok(problems.count > 0, `${what}: nothing matches ${selector}`);
    assert.deepEqual(problems.out, [], `${what} at ${JSON.stringify(page.viewportSize())}`);
    return problems.count;
  }
}

async function measureShownWhole(page: Page, selector: string): Promise<{ count: number; out: string[]; detached: boolean }> {
  return page.locator(selector).evaluateAll((elements) => {
    const out: string[] = [];
    if (elements.length === 0) return { count: 0, out, detached: false };
    if (elements.some((el) => !el.isConnected)) return { count: elements.length, out, detached: true };
    const doc = elements[0]!.ownerDocument;
    const width = doc.documentElement.clientWidth;
    const getComputedStyle = (el: (typeof elements)[number]) => doc.defaultView!.getComputedStyle(el);
    for (const el of elements) {
      const name = `${el.tagName.toLowerCase()} "${(el.textContent ?? '').slice(0, 40)}"`;
      const box = el.getBoundingClientRect();
      if (box.width === 0 || box.height === 0) out.push(`${name}: not visible`);
      const range = el.ownerDocument.createRange();
      range.selectNodeContents(el);
      for (const r of range.getClientRects()) {
        if (r.width > 0 && (r.left < -0.5 || r.right > width + 0.5)) out.push(`${name}: text from ${Math.round(r.left)} to ${Math.round(r.right)} px outside 0–${width}`);
      }
      if (getComputedStyle(el).display !== 'inline' && el.scrollWidth > el.clientWidth + 1) out.push(`${name}: clipped (${el.scrollWidth} > ${el.clientWidth} px)`);
      if (getComputedStyle(el).textOverflow === 'ellipsis') out.push(`${name}: cut with an ellipsis`);
      for (let up = el.parentElement; up; up = up.parentElement) {
        if (up.scrollWidth > up.clientWidth + 1 && getComputedStyle(up).overflowX !== 'visible') {
          out.push(`${name}: inside a ${up.tagName.toLowerCase()}.${up.className} that scrolls sideways (${up.scrollWidth} > ${up.clientWidth} px)`);
          break;
        }
      }
    }
    return { count: elements.length, out, detached: false };
  });
}
