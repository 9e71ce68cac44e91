// `npm run docs:screenshots`: regenerate the dashboard's screenshots in docs/img/ against a real
// `glidepath up` with a simulated fleet — two models under load, a canary running on one of them
// with its evidence — driven by Debian's Chromium (apt-get install chromium). Built first (dist/).
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { canaryConfigYaml, LoadGen } from '../test/helpers/e2e-canary.js';
import { cleanupAll, ensureBuilt, removeDir, ROOT, startUp, tempDir, writeConfig } from '../test/helpers/e2e-up.js';
import { launchChromium, loggedIn } from '../test/helpers/browser.js';
import type { Page } from 'playwright-core';

const OUT = path.join(ROOT, 'docs/img');
const TOKEN = 'screenshot-operator-token';

async function main(): Promise<void> {
  ensureBuilt();
  mkdirSync(OUT, { recursive: true });
  const dir = tempDir('screenshots');
  const yaml = canaryConfigYaml({
    dataDir: `${dir}/state`,
    tickMs: 250,
    models: [
      {
        name: 'chat',
        versions: [
          { id: 'v1', seed: 1, prefillTokensPerS: 400, interTokenMs: 3, jitter: 0.2 },
          { id: 'v2', seed: 2, prefillTokensPerS: 400, interTokenMs: 3, jitter: 0.2, warmupRequests: 20 },
        ],
        canary: { stages: [10, 25, 50, 100], stageDurationMs: 60_000, minSamples: 60, shadowShare: 0.3 },
      },
      { name: 'summarize', versions: [{ id: 'v7', seed: 7, prefillTokensPerS: 800, interTokenMs: 2, jitter: 0.2 }] },
    ],
  });
  writeConfig(dir, `${yaml}auth:\n  tokens:\n    - { name: alice, role: operator, token: ${TOKEN} }\n`);
  const up = await startUp({ configFile: `${dir}/glidepath.yaml`, dataDir: `${dir}/state`, token: TOKEN });
  const load = new LoadGen(up.dataUrl, ['chat', 'summarize'], {
    concurrency: 3,
    maxTokens: 8,
    maxRequests: 1e9,
    maxMs: 600_000,
    // streamed, so that TTFT and TPOT are measured
    extra: { stream: true },
  });
  const browser = await launchChromium();
  try {
    const shot = async (name: string, p: Page, fullPage = true) => {
      await p.screenshot({ path: path.join(OUT, `dashboard-${name}.png`), fullPage });
      console.log(`docs/img/dashboard-${name}.png`);
    };
    const anon = await browser.newContext({ viewport: { width: 1000, height: 640 } });
    const loginPage = await anon.newPage();
    await loginPage.goto(`${up.adminUrl}/dashboard/`);
    await loginPage.getByLabel('Admin API token').waitFor();
    await shot('login', loginPage, false);
    await anon.close();

    await up.ok('POST', '/models/chat/canary', { version: 'v2' });
    const { page, foreign } = await loggedIn(browser, up.adminUrl, TOKEN, { hash: '#/model/chat' });
    // the evidence needs both versions' samples and a first verdict: wait for them on the page
    await page.getByTestId('canary-metrics').waitFor({ timeout: 120_000 });
    await page.getByTestId('distributions').locator('canvas').first().waitFor({ timeout: 60_000 });
    // five charts over time and three distributions
    await page.locator('.chart canvas').nth(7).waitFor({ timeout: 30_000 });
    await shot('model', page);

    await page.goto(`${up.adminUrl}/dashboard/#/`);
    await page.getByTestId('model-summarize').waitFor();
    await page.getByTestId('events').waitFor();
    await shot('overview', page);

    await page.goto(`${up.adminUrl}/dashboard/#/audit`);
    await page.locator('[data-testid=audit] tbody tr').first().waitFor();
    await shot('audit', page);

    await page.goto(`${up.adminUrl}/dashboard/#/model/chat/version/v2`);
    await page.getByRole('heading', { name: 'Card' }).waitFor();
    await shot('version', page);

    await page.goto(`${up.adminUrl}/dashboard/#/model/chat`);
    await page.getByTestId('action-rollback').waitFor();
    await page.getByTestId('action-abort').click();
    await page.getByTestId('confirm').waitFor();
    await shot('confirm', page, false);
    if (foreign.length > 0) throw new Error(`the dashboard made requests elsewhere: ${foreign.join(', ')}`);

    // a wall display: a large screen in a dark room (the system's dark scheme)
    const wall = await loggedIn(browser, up.adminUrl, TOKEN, { hash: '#/model/chat', viewport: { width: 2560, height: 1440 }, colorScheme: 'dark' });
    await wall.page.getByTestId('canary-metrics').waitFor({ timeout: 60_000 });
    await wall.page.locator('.chart canvas').nth(4).waitFor();
    await shot('wall', wall.page, false);
    await wall.context.close();
  } finally {
    await browser.close();
    await load.stop();
    await up.kill('SIGTERM');
    cleanupAll();
    removeDir(dir);
  }
}

await main();
