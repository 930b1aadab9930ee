import { randomBytes } from 'node:crypto';
import { cpSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spec, task } from '../../packages/server/test/support/spec-builders.js';
import {
  accessibilityViolations,
  BROWSER_HOWTO,
  browserAvailability,
  CHROMIUM,
  launchBrowser,
  type Browser,
} from '../support/browser.js';
import {
  api,
  REPO,
  scratchDir,
  startStandalone,
  waitFor,
  writeDag,
  type Standalone,
} from '../support/processes.js';

/**
 * The web app against a real `leoflow standalone` with the examples, in Debian's chromium:
 * sign-in, live grid, logs, roles, and the promise that a secret never reaches the browser.
 */
const CANARY = `canary-${randomBytes(12).toString('hex')}`;

interface RunDetail {
  run: { run_id: string; state: string; conf: Record<string, unknown> };
  task_instances: { task_id: string; state: string; try_number: number }[];
}

let scratch: ReturnType<typeof scratchDir>;
let sa: Standalone;
let admin: Browser;
let viewerToken: string;
let page: Page;

const availability = browserAvailability();
if (availability === 'skip') {
  process.stderr.write(
    `web app browser tests skipped: no ${CHROMIUM}; to run them, ${BROWSER_HOWTO}\n`,
  );
}

beforeAll(async () => {
  if (availability !== 'run') return;
  scratch = scratchDir('leoflow-ui-');
  // The examples, plus one task that runs long enough to revoke its credential while it runs.
  const dags = join(scratch.dir, 'dags');
  cpSync(join(REPO, 'examples/dags'), dags, { recursive: true });
  writeDag(
    dags,
    'slow_task',
    `dag_id: slow_task
tasks:
  - task_id: sleeper
    command: |
      echo "sleeping"
      sleep 60
`,
  );
  sa = await startStandalone({
    dataDir: join(scratch.dir, 'data'),
    dagsFolder: dags,
    extraArgs: ['--vault-seed', join(REPO, 'examples/vault')],
  });
  // A secret the pages must never show nor receive unless someone with the permission reveals it.
  await api(sa, 'PUT', '/api/v1/variables/ui_canary', { value: CANARY, secret: true });
  // A task that is delivered the canary Variable (by name on the page, never by value); pushed
  // once the Variable exists, since a DAG may not declare an unknown name.
  await api(
    sa,
    'POST',
    '/api/v1/dags',
    spec({
      dag_id: 'canary_reader',
      variables: ['ui_canary'],
      tasks: [task('reader', { command: 'test -n "$AIRFLOW_VAR_UI_CANARY" && echo delivered' })],
    }),
  );
  viewerToken = (
    await api<{ token: string }>(sa, 'POST', '/api/v1/tokens', {
      role: 'viewer',
      name: 'ui-viewer',
    })
  ).token;
  admin = await launchBrowser();
  page = await admin.newPage();
}, 120_000);

afterAll(async () => {
  await admin?.close();
  await sa?.stop();
  scratch?.cleanup();
});

/** `npm run docs:screenshots` sets this; otherwise the tests never write into the tree. */
const SHOTS = process.env.LEOFLOW_DOCS_SCREENSHOTS === '1' ? join(REPO, 'docs/ui') : null;
async function shot(p: Page, name: string): Promise<void> {
  if (!SHOTS) return;
  mkdirSync(SHOTS, { recursive: true });
  await p.waitForTimeout(300);
  await p.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

async function noSecretInDom(p: Page): Promise<void> {
  const html = await p.evaluate<string>('document.documentElement.outerHTML');
  expect(html).not.toContain(CANARY);
}

describe.runIf(availability === 'missing')('web app in chromium (browser missing)', () => {
  it('requires chromium (CI=true or LEOFLOW_TEST_REQUIRE_BROWSER=1)', () => {
    throw new Error(
      `chromium is required but ${CHROMIUM} does not exist; to fix: ${BROWSER_HOWTO}`,
    );
  });
});

describe.runIf(availability === 'run').sequential('web app in chromium', () => {
  it('signs in with the one-time URL standalone printed, which works only once', async () => {
    const m = /sign in\s+(http:\/\/\S+\/sign-in#code=\S+)/.exec(sa.output());
    expect(m?.[1], sa.output()).toBeTruthy();
    const url = m?.[1] ?? '';
    await page.goto(url);
    await page.getByRole('heading', { name: 'DAGs' }).waitFor();
    expect(page.url()).toBe(`${sa.url}/`);
    await page.getByRole('link', { name: 'etl_python' }).waitFor();
    // The cookie is HttpOnly: scripts in the page cannot read it.
    expect(await page.evaluate('document.cookie')).toBe('');
    const cookies = await admin.context.cookies(sa.url);
    expect(cookies.find((c) => c.name === 'leoflow_session')).toMatchObject({
      httpOnly: true,
      sameSite: 'Strict',
    });
    await noSecretInDom(page);
    expect(await accessibilityViolations(page)).toEqual([]);
    await shot(page, 'dags');

    // The same link in another browser is refused: the code was spent.
    const other = await launchBrowser();
    try {
      const p = await other.newPage();
      await p.goto(url);
      await p.getByRole('alert').waitFor();
      expect(await p.getByRole('alert').textContent()).toContain('used already or has expired');
    } finally {
      await other.close();
    }
  });

  it('triggers etl_python with conf and watches the grid turn green live', async () => {
    await page.getByRole('link', { name: 'etl_python' }).click();
    await page.getByRole('heading', { name: 'etl_python' }).waitFor();
    await noSecretInDom(page);
    expect(await accessibilityViolations(page)).toEqual([]);
    await page.getByRole('link', { name: 'Trigger…' }).click();
    const conf = page.getByLabel('Conf (JSON)');
    await conf.fill('{"multiplier": 7, "note": "from the browser"}');
    await shot(page, 'trigger');
    await page.getByRole('button', { name: 'Trigger run' }).click();
    await page.getByRole('heading', { name: 'Grid' }).waitFor();
    const runs = await waitFor('the triggered run', async () => {
      const r = await api<{ runs: { run_id: string; run_type: string }[] }>(
        sa,
        'GET',
        '/api/v1/runs?dag_id=etl_python&limit=20',
      );
      return r.runs.find((x) => x.run_type === 'manual');
    });
    const detail = await api<RunDetail>(sa, 'GET', `/api/v1/dags/etl_python/runs/${runs.run_id}`);
    expect(detail.run.conf).toEqual({ multiplier: 7, note: 'from the browser' });
    // A run the page did not know about when it loaded appears and turns green, with no reload
    // (the marker set on window would not survive one).
    await page.evaluate('window.__noReload = true');
    const requestsBefore = admin.responses.length;
    await api(sa, 'POST', '/api/v1/dags/etl_python/runs', { run_id: 'live_check' });
    for (const id of [runs.run_id, 'live_check']) {
      for (const task of ['extract', 'transform', 'load']) {
        await page
          .locator(`[data-testid="cell-${id}-${task}"][data-state="success"]`)
          .waitFor({ timeout: 90_000 });
      }
    }
    expect(await page.evaluate('window.__noReload')).toBe(true);
    // Refetches follow changes (the run and the list, per change), not a polling loop.
    expect(admin.responses.length - requestsBefore).toBeLessThan(40);
    await noSecretInDom(page);
    await shot(page, 'dag-grid-graph');
    await page.getByRole('link', { name: 'Versions' }).click();
    await page.getByRole('heading', { name: 'Versions of etl_python' }).waitFor();
    await page.getByText('Only one version so far').waitFor();
    expect(await accessibilityViolations(page)).toEqual([]);
  }, 120_000);

  it('opens the failed first try of retry_demo and reads its log', async () => {
    const run = await api<{ run_id: string }>(sa, 'POST', '/api/v1/dags/retry_demo/runs', {});
    await waitFor(
      'retry_demo flaky to reach its second try',
      async () => {
        const d = await api<RunDetail>(sa, 'GET', `/api/v1/dags/retry_demo/runs/${run.run_id}`);
        const t = d.task_instances.find((x) => x.task_id === 'flaky');
        return t && t.try_number >= 2 ? t : undefined;
      },
      60_000,
    );
    await page.goto(`${sa.url}/dags/retry_demo/runs/${run.run_id}/tasks/flaky?try=1`);
    await page.getByRole('heading', { name: /flaky/ }).waitFor();
    const log = page.getByRole('log');
    await log.getByText('simulated failure on the first try').waitFor({ timeout: 20_000 });
    expect(await log.textContent()).toContain('try 1');
    await page.getByRole('cell', { name: 'failed' }).first().waitFor();
    await noSecretInDom(page);
    await shot(page, 'task-attempt-log');
    expect(await accessibilityViolations(page)).toEqual([]);
  }, 90_000);

  it('clears a task on the run page and sees the new try', async () => {
    const run = await api<{ run_id: string }>(sa, 'POST', '/api/v1/dags/hello/runs', {});
    const done = await waitFor(
      'hello to finish',
      async () => {
        const d = await api<RunDetail>(sa, 'GET', `/api/v1/dags/hello/runs/${run.run_id}`);
        return ['success', 'failed'].includes(d.run.state) ? d : undefined;
      },
      60_000,
    );
    const task = done.task_instances[0]?.task_id ?? '';
    await page.goto(`${sa.url}/dags/hello/runs/${run.run_id}`);
    await page.getByRole('heading', { name: /Run/ }).waitFor();
    const row = page.getByRole('row', { name: new RegExp(task) });
    await row.getByRole('button', { name: 'Clear and rerun' }).click();
    await row.getByRole('cell', { name: /^2 \// }).waitFor({ timeout: 60_000 });
    await shot(page, 'run');
    expect(await accessibilityViolations(page)).toEqual([]);
  }, 120_000);

  it("revokes a running attempt's credential from the run page", async () => {
    const run = await api<{ run_id: string }>(sa, 'POST', '/api/v1/dags/slow_task/runs', {});
    await waitFor(
      'sleeper to run',
      async () => {
        const d = await api<RunDetail>(sa, 'GET', `/api/v1/dags/slow_task/runs/${run.run_id}`);
        return d.task_instances[0]?.state === 'running' ? true : undefined;
      },
      60_000,
    );
    await page.goto(`${sa.url}/dags/slow_task/runs/${run.run_id}`);
    const row = page.getByRole('row', { name: /sleeper/ });
    await row.getByRole('button', { name: 'Revoke credential' }).click();
    await page.getByRole('status').getByText('credential is revoked').waitFor();
    const audit = await api<{ events: { action: string; resource_id: string }[] }>(
      sa,
      'GET',
      '/api/v1/audit?action=credential.revoke',
    );
    expect(audit.events.map((e) => e.resource_id)).toContain(`slow_task/${run.run_id}/sleeper`);
    expect(admin.errors).toEqual([]);
  }, 90_000);

  it('shows Variables masked, and an admin may reveal (the one place a value is fetched)', async () => {
    await page.goto(`${sa.url}/variables`);
    const row = page.getByRole('row', { name: /ui_canary/ });
    await row.waitFor();
    expect(await row.textContent()).not.toContain(CANARY);
    await row.getByRole('button', { name: 'Reveal' }).waitFor();
    await noSecretInDom(page);
    await shot(page, 'variables');
    await page.goto(`${sa.url}/connections`);
    await page.getByRole('row', { name: /warehouse_db/ }).waitFor();
    expect(await page.content()).not.toContain('example-not-a-real-password');
    expect(await accessibilityViolations(page)).toEqual([]);
    await page.goto(`${sa.url}/tokens`);
    await page.getByRole('row', { name: /ui-viewer/ }).waitFor();
    await page.goto(`${sa.url}/doctor`);
    await page.getByRole('heading', { name: 'Residual exposures' }).waitFor();
    // the defaults leave the credential plane closed; the first-start admin token is named
    await page.getByRole('row', { name: /admin_token\.no_expiry/ }).waitFor();
    expect(await accessibilityViolations(page)).toEqual([]);
    await shot(page, 'doctor');
    await page.goto(`${sa.url}/tenants`);
    await page.getByRole('row', { name: /default/ }).waitFor();
    expect(await accessibilityViolations(page)).toEqual([]);
    await page.goto(`${sa.url}/audit`);
    await page.getByRole('cell', { name: 'ui.sign_in' }).first().waitFor();
  });

  it('an admin creates, edits and deletes a Variable and a Connection from the forms', async () => {
    const other = `other-${randomBytes(6).toString('hex')}`;
    await page.goto(`${sa.url}/variables`);
    // reachable from the keyboard: tab to the action and press Enter
    const newVar = page.getByRole('button', { name: 'New Variable' });
    await newVar.waitFor();
    for (let i = 0; i < 40; i++) {
      const focused = await page.evaluate<string>('document.activeElement?.textContent ?? ""');
      if (focused === 'New Variable') break;
      await page.keyboard.press('Tab');
    }
    await page.keyboard.press('Enter');
    const form = page.getByRole('form', { name: 'New Variable' });
    await form.getByLabel('Key').fill('ui_made');
    await form.getByLabel('Value').fill(other);
    expect(await accessibilityViolations(page)).toEqual([]);
    await form.getByRole('button', { name: 'Save Variable' }).click();
    const row = page.getByRole('row', { name: /ui_made/ });
    await row.waitFor();
    // a secret by default: the list shows it masked
    expect(await row.textContent()).not.toContain(other);
    await row.getByRole('button', { name: 'Edit' }).click();
    const edit = page.getByRole('form', { name: 'Edit ui_made' });
    expect(await edit.getByLabel('Value').inputValue()).toBe('');
    await edit.getByLabel('Value').fill('plain-now');
    await edit.getByLabel('Secret').uncheck();
    await edit.getByRole('button', { name: 'Save Variable' }).click();
    await row.getByText('plain-now').waitFor();
    await row.getByRole('button', { name: 'Delete' }).click();
    await row.getByRole('button', { name: 'Delete ui_made for good' }).click();
    await row.waitFor({ state: 'detached' });

    // import an `airflow variables export` file pasted into the form
    await page.getByRole('button', { name: 'Import…' }).click();
    const imp = page.getByRole('form', { name: 'Import Variables' });
    await imp.getByLabel(/^Variables/).fill('{"ui_imported_a": "one", "ui_imported_n": 5}');
    await imp.getByText('2 Variables to import').waitFor();
    await imp.getByRole('button', { name: 'Import' }).click();
    await imp.getByRole('status').getByText('Imported 2 of 2 Variables.').waitFor();
    await page
      .getByRole('row', { name: /ui_imported_n/ })
      .getByText('5', { exact: true })
      .waitFor();
    expect(await accessibilityViolations(page)).toEqual([]);

    await page.goto(`${sa.url}/connections`);
    await page.getByRole('button', { name: 'New Connection' }).click();
    const cf = page.getByRole('form', { name: 'New Connection' });
    await cf.getByLabel('Id').fill('ui_conn');
    await cf.getByLabel('Type').fill('http');
    await cf.getByLabel('Host').fill('example.invalid');
    await cf.getByLabel(/^Password/).fill(other);
    await cf.getByRole('button', { name: 'Save Connection' }).click();
    const crow = page.getByRole('row', { name: /ui_conn/ });
    await crow.getByText('example.invalid').waitFor();
    expect(await crow.textContent()).not.toContain(other);
    await crow.getByRole('button', { name: 'Delete' }).click();
    await crow.getByRole('button', { name: 'Delete ui_conn for good' }).click();
    await crow.waitFor({ state: 'detached' });
    expect(await page.content()).not.toContain(other);
  });

  it('a viewer signed in with a pasted token sees neither reveal nor trigger', async () => {
    const viewer = await launchBrowser({ colorScheme: 'dark' });
    try {
      const p = await viewer.newPage();
      await p.goto(`${sa.url}/sign-in`);
      expect(await accessibilityViolations(p)).toEqual([]);
      await p.getByLabel('API token').fill(viewerToken);
      await p.getByRole('button', { name: 'Sign in' }).click();
      await p.getByRole('heading', { name: 'DAGs' }).waitFor();
      expect(await p.content()).not.toContain(viewerToken);
      // Pausing is disabled for a viewer.
      expect(await p.getByRole('switch', { name: /etl_python/ }).isDisabled()).toBe(true);
      await p.getByRole('link', { name: 'etl_python' }).click();
      await p.getByRole('heading', { name: 'Grid' }).waitFor();
      expect(await p.getByRole('link', { name: 'Trigger…' }).count()).toBe(0);
      await p.goto(`${sa.url}/dags/etl_python/trigger`);
      await p.getByText('Your role may not trigger runs').waitFor();
      await p.goto(`${sa.url}/variables`);
      await p.getByRole('row', { name: /ui_canary/ }).waitFor();
      expect(await p.getByRole('button', { name: 'Reveal' }).count()).toBe(0);
      expect(await p.getByRole('button', { name: 'New Variable' }).count()).toBe(0);
      expect(await p.getByRole('button', { name: 'Edit' }).count()).toBe(0);
      expect(await p.getByRole('link', { name: 'Doctor' }).count()).toBe(0);
      expect(await p.getByRole('link', { name: 'Tokens' }).count()).toBe(0);
      await noSecretInDom(p);
      // Sign-out ends the session on the server.
      await p.getByRole('button', { name: 'Sign out' }).click();
      await p.getByRole('heading', { name: 'Sign in to Leoflow' }).waitFor();
      expect(viewer.errors).toEqual([]);
      for (const r of viewer.responses) expect(r.body, r.url).not.toContain(CANARY);
    } finally {
      await viewer.close();
    }
  }, 60_000);

  it('the DAG page loads its grid in one request, and shows the undeclared-use summary', async () => {
    const urls: string[] = [];
    const onRequest = (r: { url(): string }) => void urls.push(r.url());
    page.on('request', onRequest);
    try {
      await page.goto(`${sa.url}/dags/etl_python`);
      await page.locator('[data-testid="cell-live_check-load"][data-state="success"]').waitFor();
      await page.getByRole('heading', { name: 'Read without declaring' }).waitFor();
      await page.getByText('No undeclared reads recorded').waitFor();
    } finally {
      page.off('request', onRequest);
    }
    const api = urls.map((u) => new URL(u).pathname).filter((u) => u.startsWith('/api/v1/'));
    expect(api.filter((u) => u === '/api/v1/dags/etl_python/grid')).toHaveLength(1);
    // no request per run: the grid's runs and task instances came in that one reply
    expect(
      api.filter((u) => u.includes('/runs/')),
      api.join('\n'),
    ).toEqual([]);
    expect(await accessibilityViolations(page)).toEqual([]);
  });

  it('the attempt page shows the delivery record: names delivered, never the values', async () => {
    const run = await api<{ run_id: string }>(sa, 'POST', '/api/v1/dags/canary_reader/runs', {});
    const done = await waitFor(
      'canary_reader to finish',
      async () => {
        const d = await api<RunDetail>(sa, 'GET', `/api/v1/dags/canary_reader/runs/${run.run_id}`);
        return ['success', 'failed'].includes(d.run.state) ? d : undefined;
      },
      60_000,
    );
    expect(done.run.state).toBe('success');
    // the Gantt on the run page: one bar per started task, linking to its attempt
    await page.goto(`${sa.url}/dags/canary_reader/runs/${run.run_id}`);
    const bar = page.getByTestId('gantt-reader');
    await bar.waitFor();
    expect(await bar.getAttribute('aria-label')).toMatch(/^reader: success, \d+s$/);
    expect(await accessibilityViolations(page)).toEqual([]);
    await shot(page, 'run-gantt');
    await bar.click();
    await page.getByRole('heading', { name: 'Delivery record of try 1' }).waitFor();
    const record = page.getByRole('definition').filter({ hasText: 'ui_canary' });
    await record.waitFor();
    // enforced scoping (the default) delivers exactly the declared name
    expect(
      await page.getByTestId('delivered-variables').getByRole('listitem').allTextContents(),
    ).toEqual(['ui_canary']);
    expect(await page.getByTestId('credential-state').textContent()).toMatch(
      /^(alive|expired) · expires /,
    );
    await page.getByText('enforce').first().waitFor();
    await noSecretInDom(page);
    expect(await accessibilityViolations(page)).toEqual([]);
    await shot(page, 'task-delivery');
  }, 90_000);

  it('no response the pages received carried the secret, and no page logged an error', async () => {
    await page.goto(`${sa.url}/no/such/page`);
    await page.getByRole('heading', { name: 'Page not found' }).waitFor();
    // an API error names what to do next (chromium logs the 404 replies themselves as console
    // errors: those, and only those, are expected here)
    const errorsBefore = admin.errors.length;
    await page.goto(`${sa.url}/dags/no_such_dag`);
    const alert = page.getByRole('alert');
    await alert.getByText('check the address, or go back to the DAGs').waitFor();
    expect(await alert.textContent()).toContain('LF_DAG_NOT_FOUND');
    expect(await accessibilityViolations(page)).toEqual([]);
    await page.waitForLoadState('networkidle');
    for (const e of admin.errors.splice(errorsBefore)) {
      expect(e).toMatch(/\/dags\/no_such_dag: Failed to load resource: .* 404 \(Not Found\)$/);
    }
    await admin.context.pages()[0]?.waitForTimeout(200);
    expect(admin.responses.length).toBeGreaterThan(10);
    for (const r of admin.responses) expect(r.body, r.url).not.toContain(CANARY);
    expect(admin.errors).toEqual([]);
  });
});
