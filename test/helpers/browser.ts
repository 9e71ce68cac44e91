// A real browser for the dashboard's end-to-end tests and screenshots: Debian's Chromium driven by
// playwright-core (which cannot download a browser of its own here). Playwright gives every launch
// a new, empty profile directory of its own (it refuses --user-data-dir for launch()); the flags
// keep Chromium from calling home (updates, sync, QUIC probes) so that the only requests are ours.
import { chromium } from 'playwright-core';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { findTool } from './find-tool.js';

export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
] as const;

/** Debian's Chromium (package chromium, /usr/bin/chromium), found on PATH as the tests' skip decision finds it. */
export function chromiumInstalled(): boolean {
  return findTool('chromium') !== undefined;
}

/** Launch headless Chromium. */
export async function launchChromium(): Promise<Browser> {
  const executablePath = findTool('chromium');
  if (executablePath === undefined) throw new Error('chromium is not installed (apt-get install chromium)');
  return chromium.launch({ executablePath, headless: true, args: [...CHROMIUM_ARGS] });
}

/**
 * A fresh context (its own cookies) on the admin listener, logged in with `token` through the
 * login form, on the page `hash` (`#/`, `#/model/M`…). Requests to anywhere but the admin
 * listener are recorded in `foreign` (the dashboard must make none), console errors and uncaught
 * exceptions in `errors`.
 */
export async function loggedIn(
  browser: Browser,
  adminUrl: string,
  token: string,
  opts: { hash?: string; viewport?: { width: number; height: number }; colorScheme?: 'light' | 'dark' } = {},
): Promise<{ context: BrowserContext; page: Page; foreign: string[]; errors: string[] }> {
  const context = await browser.newContext({ viewport: opts.viewport ?? { width: 1440, height: 1000 }, colorScheme: opts.colorScheme ?? 'light' });
  const foreign: string[] = [];
  const origin = new URL(adminUrl).origin;
  context.on('request', (r) => {
    const u = r.url();
    if (!u.startsWith(origin) && !u.startsWith('data:')) foreign.push(u);
  });
  const page = await context.newPage();
  // the console's errors and the page's exceptions: a CSP violation (an inline style, a foreign script) shows here
  const errors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`${adminUrl}/dashboard/${opts.hash ?? ''}`);
  await page.getByLabel('Admin API token').fill(token);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByTestId('me').waitFor();
  return { context, page, foreign, errors };
}
