import { cpSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  accessibilityViolations,
  browserAvailability,
  launchBrowser,
  type Browser,
} from '../support/browser.js';
import {
  api,
  REPO,
  scratchDir,
  startStandalone,
  waitFor,
  type Standalone,
} from '../support/processes.js';

/**
 * The task graph without a mouse, in chromium against a real standalone with the examples:
 * Tab reaches the task nodes, arrows follow the edges, Enter opens the task; axe-core passes
 * with a node focused.
 */
const availability = browserAvailability();
let scratch: ReturnType<typeof scratchDir>;
let sa: Standalone;
let browser: Browser;
let page: Page;
let runId: string;

beforeAll(async () => {
  if (availability !== 'run') return;
  scratch = scratchDir('leoflow-ui-graph-');
  const dags = join(scratch.dir, 'dags');
  cpSync(join(REPO, 'examples/dags/etl_python'), join(dags, 'etl_python'), { recursive: true });
  sa = await startStandalone({ dataDir: join(scratch.dir, 'data'), dagsFolder: dags });
  await waitFor('etl_python loaded', async () => {
    const r = await fetch(`${sa.url}/api/v1/dags/etl_python`, {
      headers: { authorization: `Bearer ${sa.token}` },
    });
    return r.ok ? true : undefined;
  });
  runId = (await api<{ run_id: string }>(sa, 'POST', '/api/v1/dags/etl_python/runs', {})).run_id;
  browser = await launchBrowser();
  page = await browser.newPage();
  const m = /sign in\s+(http:\/\/\S+\/sign-in#code=\S+)/.exec(sa.output());
  await page.goto(m?.[1] ?? '');
  await page.getByRole('heading', { name: 'DAGs' }).waitFor();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await sa?.stop();
  scratch?.cleanup();
});

const focusedTask = (p: Page) =>
  p.evaluate<string | null | undefined>(
    "document.activeElement?.closest('.react-flow__node')?.getAttribute('data-id')",
  );

describe.runIf(availability === 'run').sequential('task graph by keyboard in chromium', () => {
  it('Tab reaches the first task, arrows follow the edges, Enter opens the task', async () => {
    await page.goto(`${sa.url}/dags/etl_python/runs/${encodeURIComponent(runId)}`);
    await page.locator('.react-flow__node[data-id="load"]').waitFor();
    // From the top of the page, Tab until focus lands in the graph (bounded).
    let hops = 0;
    while ((await focusedTask(page)) == null && hops < 60) {
      await page.keyboard.press('Tab');
      hops += 1;
    }
    expect(await focusedTask(page)).toBe('extract');
    const label = await page.evaluate<string | null | undefined>(
      "document.activeElement?.getAttribute('aria-label')",
    );
    expect(label).toMatch(/^task extract; \w+; python; trigger rule all_success; no upstream task/);
    // The next Tab stays in the picture's reading order.
    await page.keyboard.press('Tab');
    expect(await focusedTask(page)).toBe('transform');
    await page.keyboard.press('Shift+Tab');
    expect(await focusedTask(page)).toBe('extract');

    await page.keyboard.press('ArrowRight');
    expect(await focusedTask(page)).toBe('transform');
    await page.keyboard.press('ArrowRight');
    expect(await focusedTask(page)).toBe('load');
    await page.keyboard.press('ArrowRight');
    expect(await focusedTask(page)).toBe('load');
    await page.keyboard.press('ArrowLeft');
    expect(await focusedTask(page)).toBe('transform');
    await page.keyboard.press('Home');
    expect(await focusedTask(page)).toBe('extract');
    await page.keyboard.press('End');
    expect(await focusedTask(page)).toBe('load');
    expect(await accessibilityViolations(page)).toEqual([]);

    await page.keyboard.press('ArrowLeft');
    await page.keyboard.press('Enter');
    await page.waitForURL(/\/tasks\/transform$/);
    expect(browser.errors).toEqual([]);
  });

  it('the DAG page graph moves the same way, and its nodes say what each task declares', async () => {
    await page.goto(`${sa.url}/dags/etl_python`);
    const load = page.locator('.react-flow__node[data-id="load"]');
    await load.waitFor();
    await page.locator('.react-flow__node[data-id="extract"]').focus();
    await page.keyboard.press('End');
    expect(await focusedTask(page)).toBe('load');
    expect(await load.getAttribute('aria-label')).toContain('after transform');
    expect(await accessibilityViolations(page)).toEqual([]);
  });
});
