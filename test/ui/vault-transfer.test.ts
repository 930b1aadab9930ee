import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  accessibilityViolations,
  browserAvailability,
  launchBrowser,
  type Browser,
} from '../support/browser.js';
import { api, scratchDir, startStandalone, type Standalone } from '../support/processes.js';

/**
 * Variables and Connections import and export in the browser, against a real standalone (its
 * own, so the full exports here never mix with the secret-never-reaches-the-browser checks of
 * web-app.test.ts): an export carries secret values only for a role with the reveal
 * permission, and the server audits it; an import reports each item.
 */
const SECRET = `var-secret-${randomBytes(8).toString('hex')}`;
const PASSWORD = `conn-pw-${randomBytes(8).toString('hex')}`;

const availability = browserAvailability();
let scratch: ReturnType<typeof scratchDir>;
let sa: Standalone;
let admin: Browser;
let viewer: Browser;
let viewerToken: string;

beforeAll(async () => {
  if (availability !== 'run') return;
  scratch = scratchDir('leoflow-ui-transfer-');
  sa = await startStandalone({ dataDir: join(scratch.dir, 'data') });
  await api(sa, 'PUT', '/api/v1/variables/plain_var', { value: 'eu-west', secret: false });
  await api(sa, 'PUT', '/api/v1/variables/secret_var', { value: SECRET, secret: true });
  await api(sa, 'PUT', '/api/v1/connections/db1', {
    connection: { conn_type: 'postgres', host: 'db.internal', login: 'etl', password: PASSWORD },
  });
  viewerToken = (
    await api<{ token: string }>(sa, 'POST', '/api/v1/tokens', { role: 'viewer', name: 'v' })
  ).token;
  admin = await launchBrowser();
  viewer = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await admin?.close();
  await viewer?.close();
  await sa?.stop();
  scratch?.cleanup();
});

async function download(page: Page, button: string): Promise<string> {
  const [file] = await Promise.all([
    page.waitForEvent('download'),
    page.getByRole('button', { name: button }).click(),
  ]);
  return readFileSync(await file.path(), 'utf8');
}

describe.runIf(availability === 'run').sequential('vault import and export in chromium', () => {
  let page: Page;

  it('an admin exports Variables and Connections with their values, and the server audits both', async () => {
    const m = /sign in\s+(http:\/\/\S+\/sign-in#code=\S+)/.exec(sa.output());
    page = await admin.newPage();
    await page.goto(m?.[1] ?? '');
    await page.getByRole('heading', { name: 'DAGs' }).waitFor();

    await page.goto(`${sa.url}/variables`);
    await page
      .getByRole('cell', { name: 'plain_var' })
      .or(page.getByText('plain_var'))
      .first()
      .waitFor();
    const vars = JSON.parse(await download(page, 'Export with values (audited)')) as Record<
      string,
      string
    >;
    expect(vars).toEqual({ plain_var: 'eu-west', secret_var: SECRET });
    // The file went to the download, not into the page.
    expect(await page.content()).not.toContain(SECRET);

    await page.goto(`${sa.url}/connections`);
    await page.getByText('db.internal').waitFor();
    const conns = JSON.parse(await download(page, 'Export with secrets (audited)')) as Record<
      string,
      Record<string, unknown>
    >;
    expect(conns.db1).toMatchObject({ conn_type: 'postgres', login: 'etl', password: PASSWORD });
    expect(await page.content()).not.toContain(PASSWORD);

    const audit = await api<{ events: { action: string; actor: string }[] }>(
      sa,
      'GET',
      '/api/v1/audit?limit=100',
    );
    const actions = audit.events.map((e) => e.action);
    expect(actions).toContain('variable.export');
    expect(actions).toContain('connection.export');
  });

  it('an admin imports Variables and Connections and sees each one’s result', async () => {
    await page.goto(`${sa.url}/variables`);
    await page.getByRole('button', { name: 'Import…' }).click();
    await page
      .getByLabel('Variables (JSON, as `airflow variables export` writes)')
      .fill(JSON.stringify({ imported_a: 'one', 'bad key!': 'x', imported_b: { n: 2 } }));
    await page.getByRole('button', { name: 'Import', exact: true }).click();
    const results = page.getByRole('table', { name: 'Variables import results' });
    await results.waitFor();
    await page.getByRole('status').filter({ hasText: 'Imported 2 of 3 Variables' }).waitFor();
    expect(await results.getByRole('row', { name: /imported_a/ }).textContent()).toContain(
      'imported',
    );
    expect(await results.getByRole('row', { name: /bad key!/ }).textContent()).toContain(
      'LF_BAD_REQUEST',
    );
    expect(await accessibilityViolations(page)).toEqual([]);
    const b = await api<{ value: string }>(sa, 'GET', '/api/v1/variables/imported_b');
    expect(b.value).toBe('{"n":2}');

    await page.goto(`${sa.url}/connections`);
    await page.getByRole('button', { name: 'Import…' }).click();
    await page.getByLabel('Connections (as `airflow connections export` writes)').fill(
      JSON.stringify({
        web1: { conn_type: 'http', host: 'example.org', port: 443, password: 'pw-web1' },
        web2: 'http://user:pw-web2@example.net:8080/path',
      }),
    );
    await page.getByRole('button', { name: 'Import', exact: true }).click();
    await page.getByRole('status').filter({ hasText: 'Imported 2 of 2 Connections' }).waitFor();
    const list = await api<{ connections: { conn_id: string; host: string }[] }>(
      sa,
      'GET',
      '/api/v1/connections',
    );
    expect(list.connections.map((c) => c.conn_id).sort()).toEqual(['db1', 'web1', 'web2']);
    expect(await accessibilityViolations(page)).toEqual([]);
    // A file the parser refuses names the problem and imports nothing.
    await page.getByLabel('Connections (as `airflow connections export` writes)').fill('{"x": 1');
    await page.getByRole('button', { name: 'Import', exact: true }).click();
    await page.getByRole('alert').waitFor();
    // The one console line is Chromium's own note on the refused item's 400, nothing from the app.
    expect(admin.errors).toEqual([
      expect.stringMatching(/\/variables: Failed to load resource: .* 400 \(Bad Request\)$/),
    ]);
  });

  it('a viewer exports without secret values and never receives one', async () => {
    const p = await viewer.newPage();
    await p.goto(`${sa.url}/sign-in`);
    await p.getByLabel('API token').fill(viewerToken);
    await p.getByRole('button', { name: 'Sign in' }).click();
    await p.getByRole('heading', { name: 'DAGs' }).waitFor();

    await p.goto(`${sa.url}/variables`);
    await p.getByText('plain_var').first().waitFor();
    expect(await p.getByRole('button', { name: 'Export with values (audited)' }).count()).toBe(0);
    const vars = JSON.parse(await download(p, 'Export without secret values')) as Record<
      string,
      string
    >;
    expect(vars.plain_var).toBe('eu-west');
    expect(vars).not.toHaveProperty('secret_var');
    await p.getByRole('status').filter({ hasText: 'left out (secret): secret_var' }).waitFor();

    await p.goto(`${sa.url}/connections`);
    await p.getByText('db.internal').waitFor();
    expect(await p.getByRole('button', { name: 'Export with secrets (audited)' }).count()).toBe(0);
    const conns = await download(p, 'Export without secrets');
    expect(JSON.parse(conns)).toMatchObject({ db1: { host: 'db.internal', password: null } });
    expect(conns).not.toContain(PASSWORD);
    expect(await accessibilityViolations(p)).toEqual([]);

    await viewer.close();
    for (const r of viewer.responses) {
      expect(r.body, r.url).not.toContain(SECRET);
      expect(r.body, r.url).not.toContain(PASSWORD);
    }
    expect(viewer.errors).toEqual([]);
  });
});
