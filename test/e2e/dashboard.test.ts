// The dashboard in a real browser (Debian's Chromium driven by playwright-core) against a real
// `glidepath up` with simulated workers: log in (the token never lands in the page's storage or
// URL, the cookie is HttpOnly, nothing is fetched from elsewhere); start a canary from the page and
// watch it progress and roll back, the page showing the rollback within a second of the server's
// event; swap and roll back from the page and see the traffic move; a viewer's confirmed action
// refused by the server (operated by keyboard alone); an idle session sent back to the login form.
import { afterAll, beforeAll, describe, expect } from 'vitest';
import type { Browser } from 'playwright-core';
import type { RouteView } from '../../src/api/types.js';
import { chromiumInstalled, launchChromium, loggedIn } from '../helpers/browser.js';
import { canaryConfigYaml, LoadGen } from '../helpers/e2e-canary.js';
import { cleanupAll, collectEvents, ensureBuilt, removeDir, startUp, streamChat, tempDir, writeConfig } from '../helpers/e2e-up.js';
import type { UpProcess } from '../helpers/e2e-up.js';
import { OPTIONAL_TOOLS, itWithTool } from '../helpers/tools.js';

const it = itWithTool('chromium', OPTIONAL_TOOLS.chromium);
const OPS = 'dashboard-e2e-operator';
const VIEW = 'dashboard-e2e-viewer';

function tokens(idleMs?: number): string {
  return [
    'auth:',
    ...(idleMs === undefined ? [] : [`  session_idle_ms: ${idleMs}`]),
    '  tokens:',
    `    - { name: ops, role: operator, token: ${OPS} }`,
    `    - { name: watcher, role: viewer, token: ${VIEW} }`,
    '',
  ].join('\n');
}

/**
 * Run in the page (a string: this file is typed without the DOM): record every canary phase the page
 * shows, the largest weight it shows for v2, and when (the page's clock) it first shows rolled_back.
 */
const WATCH_CANARY = `(() => {
  const w = window;
  w.seen = { phases: [], v2: 0 };
  const look = () => {
    const phase = document.querySelector('[data-testid=canary-phase]')?.textContent ?? '';
    if (phase !== '' && w.seen.phases.at(-1) !== phase) w.seen.phases.push(phase);
    if (phase === 'rolled_back' && w.seen.rolledBackAt === undefined) w.seen.rolledBackAt = Date.now();
    const v2 = Number(document.querySelector('[data-testid=route] [data-version=v2]')?.getAttribute('data-weight') ?? 0);
    w.seen.v2 = Math.max(w.seen.v2, v2);
  };
  new MutationObserver(look).observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
})()`;

let browser: Browser | undefined;
let dir = '';
let up: UpProcess | undefined;
let load: LoadGen | undefined;

function b(): Browser {
  if (browser === undefined) throw new Error('chromium did not start');
  return browser;
}
function u(): UpProcess {
  if (up === undefined) throw new Error('glidepath up did not start');
  return up;
}

beforeAll(async () => {
  if (!chromiumInstalled()) return;
  ensureBuilt();
  browser = await launchChromium();
  dir = tempDir('dashboard');
  const yaml = canaryConfigYaml({
    dataDir: `${dir}/state`,
    tickMs: 100,
    models: [
      {
        name: 'errors',
        versions: [
          { id: 'v1', seed: 11, prefillTokensPerS: 1_000 },
          { id: 'v2', seed: 12, prefillTokensPerS: 1_000, errorRate: 0.3 },
        ],
        canary: { stages: [10, 25, 50, 100], stageDurationMs: 2_000, minSamples: 100 },
      },
      {
        name: 'chat',
        versions: [
          { id: 'v1', seed: 21, prefillTokensPerS: 1_000 },
          { id: 'v2', seed: 22, prefillTokensPerS: 1_000 },
        ],
      },
    ],
  });
  writeConfig(dir, yaml + tokens());
  up = await startUp({ configFile: `${dir}/glidepath.yaml`, dataDir: `${dir}/state`, token: OPS });
  load = new LoadGen(up.dataUrl, ['errors', 'chat'], { concurrency: 4, maxTokens: 6, maxRequests: 1e9, maxMs: 600_000 });
}, 90_000);

afterAll(async () => {
  await load?.stop();
  await browser?.close();
  await up?.kill('SIGTERM');
  cleanupAll();
  if (dir !== '') removeDir(dir);
});

describe('the dashboard in Chromium', () => {
  it('logs in with a token it keeps nowhere readable, behind a strict CSP, fetching nothing from elsewhere', async () => {
    const context = await b().newContext();
    const page = await context.newPage();
    const res = await page.goto(`${u().adminUrl}/dashboard/`);
    expect(res?.headers()['content-security-policy']).toContain("default-src 'self'");
    await page.getByLabel('Admin API token').fill('not-a-token');
    await page.getByRole('button', { name: 'Log in' }).click();
    await expect.poll(() => page.getByTestId('login-error').textContent()).toContain('unauthorized');
    await context.close();

    const { context: c2, page: p2, foreign, errors } = await loggedIn(b(), u().adminUrl, OPS);
    expect(await p2.getByTestId('me').textContent()).toBe('ops (operator)');
    await p2.getByTestId('model-errors').waitFor();
    const stored = String(await p2.evaluate('JSON.stringify([document.cookie, location.href, { ...localStorage }, { ...sessionStorage }])'));
    expect(stored).not.toContain(OPS);
    expect(stored).not.toContain('gp_session');
    const cookie = (await c2.cookies()).find((c) => c.name === 'gp_session');
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/' });
    // every page drawn (charts included) under the CSP without a violation or an error
    await p2.goto(`${u().adminUrl}/dashboard/#/model/chat`);
    await p2.locator('.chart canvas').nth(4).waitFor();
    await p2.goto(`${u().adminUrl}/dashboard/#/model/chat/version/v1`);
    await p2.getByRole('heading', { name: 'Card' }).waitFor();
    await p2.goto(`${u().adminUrl}/dashboard/#/audit`);
    await p2.locator('[data-testid=audit] tbody tr').first().waitFor();
    expect(foreign).toEqual([]);
    // no CSP violation, no exception; the API's 404s for "no canary, experiment or rolling update
    // running" are the only failed loads (the browser logs every 4xx)
    expect(errors.filter((e) => !e.startsWith('Failed to load resource: the server responded with a status of 404'))).toEqual([]);
    await c2.close();
  });

  it('starts a canary from the page, shows it progress, and shows its automatic rollback within a second of the event', async () => {
    const { context, page } = await loggedIn(b(), u().adminUrl, OPS, { hash: '#/model/errors' });
    const events = collectEvents(u());
    try {
      // what the page shows, as it shows it, by the page's clock (the same machine's as the server's):
      // a canary this bad may be caught within a second or two, so the page is watched, not raced
      await page.evaluate(WATCH_CANARY);
      await page.getByTestId('target-version').selectOption('v2');
      await page.getByTestId('action-canary').click();
      // the plan first: the stages with their expected times from the planner
      await expect.poll(() => page.locator('dialog[open]').getByTestId('plan').textContent()).toContain('Stages at the live rate');
      await page.locator('dialog[open]').getByTestId('confirm').click();
      await page.locator('dialog[open]').getByTestId('action-done').waitFor();
      await page.locator('dialog[open]').getByTestId('close').click();
      const ev = await events.waitFor((e) => e.kind === 'canary_rolled_back' && e.model === 'errors', 'canary_rolled_back', 60_000);
      await page.locator('[data-testid=canary-phase]', { hasText: 'rolled_back' }).waitFor({ timeout: 5_000 });
      const seen = await page.evaluate<{ phases: string[]; v2: number; rolledBackAt?: number }>('window.seen');
      // it progressed (traffic on the canary) before it was rolled back
      expect(seen.phases).toContain('progressing');
      expect(seen.phases.at(-1)).toBe('rolled_back');
      expect(seen.v2).toBeGreaterThan(0);
      const lag = (seen.rolledBackAt ?? Infinity) - ev.at;
      expect(lag, `shown ${lag} ms after the event`).toBeLessThan(1_000);
      expect(await page.getByTestId('canary-rollback').textContent()).toMatch(/canary requests/);
      await page.locator('[data-testid=route] [data-version=v1][data-weight="1"]').waitFor();
    } finally {
      events.stop();
      await context.close();
    }
  }, 120_000);

  it('swaps and rolls back from the page, and the traffic moves with each', async () => {
    await u().ok('POST', '/models/chat/deploy', { version: 'v2' });
    const { context, page } = await loggedIn(b(), u().adminUrl, OPS, { hash: '#/model/chat' });
    try {
      const servedBy = async () => (await streamChat(u().dataUrl, { model: 'chat', prompt: 'which version?', maxTokens: 2 })).version;
      await page.getByTestId('target-version').selectOption('v2');
      await page.getByTestId('action-swap').click();
      await expect.poll(() => page.locator('dialog[open]').getByTestId('plan').textContent()).toContain('becomes the standby');
      await page.locator('dialog[open]').getByTestId('confirm').click();
      await page.locator('dialog[open]').getByTestId('action-done').waitFor();
      await page.locator('dialog[open]').getByTestId('close').click();
      await page.locator('[data-testid=route] [data-version=v2][data-weight="1"]').waitFor();
      expect(await servedBy()).toBe('v2');

      await page.getByTestId('action-rollback').click();
      await expect.poll(() => page.locator('dialog[open]').getByTestId('plan').textContent()).toContain('to the standby v1');
      await page.locator('dialog[open]').getByTestId('confirm').click();
      await page.locator('dialog[open]').getByTestId('action-done').waitFor();
      await page.locator('dialog[open]').getByTestId('close').click();
      await page.locator('[data-testid=route] [data-version=v1][data-weight="1"]').waitFor();
      expect((await u().ok<RouteView>('GET', '/models/chat/route')).weights).toMatchObject({ v1: 1 });
      expect(await servedBy()).toBe('v1');
      // and the load's answers move with it
      const before = load?.stats.get('chat')?.byVersion.v1 ?? 0;
      await expect.poll(() => load?.stats.get('chat')?.byVersion.v1 ?? 0, { timeout: 10_000 }).toBeGreaterThan(before + 20);
    } finally {
      await context.close();
    }
  }, 90_000);

  it('offers a viewer the buttons, and the server refuses the confirmed action (403, audited), changing nothing', async () => {
    const routeBefore = await u().ok<RouteView>('GET', '/models/chat/route');
    const { context, page } = await loggedIn(b(), u().adminUrl, VIEW, { hash: '#/model/chat' });
    try {
      await expect.poll(() => page.getByRole('group', { name: 'Actions on chat' }).textContent()).toContain('logged in as a viewer');
      // v2 is the standby again (a rolled-back version is no rollback target, so swap is the change on offer)
      // by keyboard alone: the dialog opens with focus on Cancel (the safe default), Confirm is one Shift+Tab away
      const focused = () => page.evaluate<string | undefined>('document.activeElement?.dataset?.testid');
      await page.getByTestId('target-version').selectOption('v2');
      await page.getByTestId('action-swap').focus();
      await page.keyboard.press('Enter');
      await page.locator('dialog[open]').getByTestId('confirm').waitFor();
      expect(await focused()).toBe('close');
      await page.keyboard.press('Shift+Tab');
      expect(await focused()).toBe('confirm');
      await page.keyboard.press('Enter');
      const err = page.locator('dialog[open]').getByTestId('action-error');
      await err.waitFor();
      expect(await err.textContent()).toMatch(/403 forbidden.*watcher.*viewer/);
      // Escape closes it, and focus goes back to the button that opened it
      await page.keyboard.press('Escape');
      await page.locator('dialog[open]').waitFor({ state: 'detached' });
      expect(await focused()).toBe('action-swap');
      const after = await u().ok<RouteView>('GET', '/models/chat/route');
      expect(after.revision).toBe(routeBefore.revision);
      const denied = await u().ok<{ actor: string; target: string }[]>('GET', '/audit?action=denied&actor=watcher');
      expect(denied[0]?.target).toBe('POST /models/chat/swap');
    } finally {
      await context.close();
    }
  });
});

describe('an idle session', () => {
  let up2: UpProcess | undefined;
  let dir2 = '';
  const IDLE = 2_000;
  beforeAll(async () => {
    if (!chromiumInstalled()) return;
    dir2 = tempDir('dashboard-idle');
    const yaml = canaryConfigYaml({ dataDir: `${dir2}/state`, models: [{ name: 'solo', versions: [{ id: 'v1', seed: 1 }] }] });
    writeConfig(dir2, yaml + tokens(IDLE));
    up2 = await startUp({ configFile: `${dir2}/glidepath.yaml`, dataDir: `${dir2}/state`, token: OPS });
  }, 60_000);
  afterAll(async () => {
    await up2?.kill('SIGTERM');
    if (dir2 !== '') removeDir(dir2);
  });

  it('is sent back to the login form once it has expired, and its cookie no longer opens the API', async () => {
    if (up2 === undefined) throw new Error('glidepath up did not start');
    const { context, page } = await loggedIn(b(), up2.adminUrl, VIEW);
    try {
      const started = Date.now();
      const notice = page.getByTestId('login-notice');
      await notice.waitFor({ timeout: IDLE + 10_000 });
      expect(Date.now() - started).toBeGreaterThanOrEqual(IDLE - 100);
      expect(await notice.textContent()).toContain('expired');
      const r = await context.request.get(`${up2.adminUrl}/admin/v1/status`);
      expect(r.status()).toBe(401);
      expect(((await r.json()) as { error: { code: string } }).error.code).toBe('session_expired');
      // and logging in again works
      await page.getByLabel('Admin API token').fill(VIEW);
      await page.getByRole('button', { name: 'Log in' }).click();
      await page.getByTestId('model-solo').waitFor();
    } finally {
      await context.close();
    }
  }, 40_000);
});
