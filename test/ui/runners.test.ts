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
 * The runner pages in chromium against a real standalone with a door (so registration prints a
 * launch command): an operator registers an inbound runner and sees its launch command once,
 * copies it, shows it again (audited), registers an ssh runner against a Connection, and deletes
 * with a confirmation; a viewer (runners:read only) sees every runner but no control and never
 * receives a token.
 */
const HOST_KEY = `SHA256:${'Ab3+/'.repeat(8)}Ab3`;

const availability = browserAvailability();
let scratch: ReturnType<typeof scratchDir>;
let sa: Standalone;
let operator: Browser;
let viewer: Browser;
let operatorToken: string;
let viewerToken: string;
/** every runner token minted here: none may reach the viewer */
const minted: string[] = [];

beforeAll(async () => {
  if (availability !== 'run') return;
  scratch = scratchDir('leoflow-ui-runners-');
  sa = await startStandalone({
    dataDir: join(scratch.dir, 'data'),
    extraArgs: ['--door-port', '0'],
  });
  await api(sa, 'PUT', '/api/v1/connections/gpu_box_key', {
    connection: { conn_type: 'ssh', login: 'leoflow', password: 'not-a-real-key' },
  });
  // A runner the viewer finds already there, its token known only to the test.
  const pre = await api<{ token: string }>(sa, 'POST', '/api/v1/runners', {
    name: 'pre-existing',
    kind: 'inbound',
    labels: { zone: 'lab' },
  });
  minted.push(pre.token);
  const mint = async (role: string) =>
    (await api<{ token: string }>(sa, 'POST', '/api/v1/tokens', { role, name: role })).token;
  operatorToken = await mint('operator');
  viewerToken = await mint('viewer');
  operator = await launchBrowser();
  viewer = await launchBrowser();
  await operator.context.grantPermissions(['clipboard-read', 'clipboard-write'], {
    origin: sa.url,
  });
}, 120_000);

afterAll(async () => {
  await operator?.close();
  await viewer?.close();
  await sa?.stop();
  scratch?.cleanup();
});

async function signIn(page: Page, token: string): Promise<void> {
  // A missing element fails with its locator, well inside the test's own timeout.
  page.setDefaultTimeout(10_000);
  await page.goto(`${sa.url}/sign-in`);
  await page.getByLabel('API token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'DAGs' }).waitFor();
}

describe.runIf(availability === 'run').sequential('runner pages in chromium', () => {
  let page: Page;

  it('an operator registers an inbound runner and sees its launch command once, with a copy button', async () => {
    page = await operator.newPage();
    await signIn(page, operatorToken);
    await page.getByRole('link', { name: 'Runners' }).click();
    await page.getByRole('heading', { name: 'Runners' }).waitFor();
    await page.getByRole('link', { name: 'pre-existing' }).waitFor();

    await page.getByRole('button', { name: 'Register runner' }).click();
    const form = page.getByRole('form', { name: 'Register a runner' });
    await form.getByLabel('Name').fill('build-box');
    await form.getByLabel('Labels (k=v, comma-separated)').fill('gpu=a100, zone=lab');
    await form.getByLabel('Capacity (attempts at once)').fill('4');
    await form.getByRole('button', { name: 'Register runner' }).click();

    const done = page.getByRole('region', { name: 'Runner build-box registered' });
    const command = (await done.getByLabel('Launch command').textContent()) ?? '';
    expect(command).toMatch(/^printf '%s\\n' 'http:\/\/127\.0\.0\.1:\d+\/runners\/lfr_[\w-]+\/'/);
    expect(command).toContain('| leoflow-runner --url-stdin');
    const token = /\/runners\/(lfr_[\w-]+)\//.exec(command)?.[1] ?? '';
    minted.push(token);
    expect(await accessibilityViolations(page)).toEqual([]);

    await done.getByRole('button', { name: 'Copy launch command' }).click();
    await done.getByRole('status').filter({ hasText: 'Copied.' }).waitFor();
    expect(await page.evaluate<string>('navigator.clipboard.readText()')).toBe(command);

    // Once: after Done, and after a fresh load of the list, the token is nowhere in the page.
    await done.getByRole('button', { name: 'Done' }).click();
    expect(await page.content()).not.toContain(token);
    await page.reload();
    const row = page.getByRole('row', { name: /build-box/ });
    await row.waitFor();
    expect(await row.textContent()).toContain('gpu=a100');
    expect(await row.textContent()).toContain('zone=lab');
    expect(await page.content()).not.toContain(token);
  });

  it('an operator shows the launch command again from the runner page, and the server audits it', async () => {
    await page.getByRole('link', { name: 'build-box' }).click();
    await page.getByRole('heading', { name: 'build-box' }).waitFor();
    expect(await page.getByText('4 attempts at once').count()).toBe(1);
    expect(await page.content()).not.toContain(minted[1]);
    await page.getByRole('button', { name: 'Show launch command (audited)' }).click();
    expect(await page.getByLabel('Launch command').textContent()).toContain(minted[1]);
    const audit = await api<{ events: { action: string; resource_id: string }[] }>(
      sa,
      'GET',
      '/api/v1/audit?limit=100&action=runner.token_read',
    );
    expect(audit.events.map((e) => e.resource_id)).toEqual(['build-box']);
    await page.getByRole('button', { name: 'Hide launch command' }).click();
    expect(await page.content()).not.toContain(minted[1]);
    expect(await accessibilityViolations(page)).toEqual([]);
  });

  it('an operator registers an ssh runner with a Connection and a pinned host key; a bad key is refused with its code', async () => {
    await page.goto(`${sa.url}/fleet`);
    await page.getByRole('button', { name: 'Register runner' }).click();
    const form = page.getByRole('form', { name: 'Register a runner' });
    await form.getByLabel('Name').fill('gpu-box');
    await form.getByLabel('Kind').selectOption('ssh');
    await form.getByLabel('SSH host').fill('10.0.0.7');
    await form.getByLabel('SSH port').fill('2222');
    await form.getByLabel('SSH user').fill('leoflow');
    await form
      .getByLabel('Credential (the Connection that holds the private key)')
      .selectOption('gpu_box_key');
    await form.getByLabel(/^Host key/).fill('not a host key');
    await form.getByRole('button', { name: 'Register runner' }).click();
    const refusal = form.getByRole('alert');
    await refusal.waitFor();
    expect(await refusal.textContent()).toContain('LF_RUNNER_INVALID');
    expect(await refusal.textContent()).toContain('never learned on first use');

    await form.getByLabel(/^Host key/).fill(HOST_KEY);
    await form.getByRole('button', { name: 'Register runner' }).click();
    const done = page.getByRole('region', { name: 'Runner gpu-box registered' });
    expect(await done.textContent()).toContain('leoflow@10.0.0.7:2222');
    expect(await done.getByLabel('Launch command').count()).toBe(0);
    await done.getByRole('link', { name: 'Open gpu-box' }).click();
    await page.getByRole('heading', { name: 'gpu-box' }).waitFor();
    expect(await page.getByText(HOST_KEY).count()).toBe(1);
    expect(await page.getByRole('button', { name: 'Show launch command (audited)' }).count()).toBe(
      0,
    );
    expect(await accessibilityViolations(page)).toEqual([]);
  });

  it('a viewer sees every runner and its details, but no register, delete or reveal control, and never a token', async () => {
    const p = await viewer.newPage();
    await signIn(p, viewerToken);
    await p.getByRole('link', { name: 'Runners' }).click();
    for (const name of ['pre-existing', 'build-box', 'gpu-box']) {
      await p.getByRole('link', { name }).waitFor();
    }
    expect(await p.getByRole('button', { name: 'Register runner' }).count()).toBe(0);
    expect(await p.getByRole('button', { name: 'Delete' }).count()).toBe(0);
    expect(await accessibilityViolations(p)).toEqual([]);
    await p.getByRole('link', { name: 'build-box' }).click();
    await p.getByRole('heading', { name: 'build-box' }).waitFor();
    expect(await p.getByRole('button', { name: 'Show launch command (audited)' }).count()).toBe(0);
    expect(await p.getByRole('button', { name: 'Delete' }).count()).toBe(0);
    expect(await accessibilityViolations(p)).toEqual([]);

    await viewer.close();
    expect(minted).toHaveLength(2);
    expect(viewer.responses.some((r) => r.url.endsWith('/api/v1/runners/build-box'))).toBe(true);
    for (const r of viewer.responses) {
      for (const t of minted) expect(r.body, r.url).not.toContain(t);
    }
    expect(viewer.errors).toEqual([]);
  });

  it('an operator deletes a runner only after confirming; its token stops resolving', async () => {
    type Held = { __holdScheduler?: boolean };
    const holdScheduler = (on: boolean) =>
      page.evaluate((value) => {
        (globalThis as Held).__holdScheduler = value;
      }, on);
    await page.addInitScript(() => {
      const post = Object.getOwnPropertyDescriptor(MessagePort.prototype, 'postMessage')?.value as (
        this: unknown,
        ...args: unknown[]
      ) => void;
      MessagePort.prototype.postMessage = function (this: unknown, ...args: unknown[]) {
        const send = () => post.apply(this, args);
        if ((globalThis as Held).__holdScheduler) setTimeout(send, 50);
        else send();
      };
    });
    await page.goto(`${sa.url}/fleet/build-box`);
    await page.getByRole('heading', { name: 'build-box' }).waitFor();
    await page.getByRole('button', { name: 'Delete' }).click();
    // The first click only asks; Keep backs out and nothing is deleted.
    await page.getByRole('button', { name: 'Keep' }).click();
    expect((await api<{ name: string }>(sa, 'GET', '/api/v1/runners/build-box')).name).toBe(
      'build-box',
    );
    await page.getByRole('button', { name: 'Delete' }).click();
    // React renders a navigation (a transition) in scheduler tasks posted over a MessageChannel;
    // the mutation's own notification comes in a timer. Holding the scheduler's messages back for
    // a moment makes the page re-render on that notification before the navigation away
    // commits — the order a slow machine produces at random. The page must not fetch its
    // deleted runner then.
    await holdScheduler(true);
    await operator.settled();
    const before = operator.responses.length;
    await page.getByRole('button', { name: 'Delete build-box for good' }).click();
    await page.getByRole('heading', { name: 'Runners' }).waitFor();
    await holdScheduler(false);
    await page.getByRole('link', { name: 'gpu-box' }).waitFor();
    await operator.settled();
    const refetched = operator.responses
      .slice(before)
      .filter((r) => r.method === 'GET' && new URL(r.url).pathname === '/api/v1/runners/build-box');
    expect(refetched.map((r) => r.status)).toEqual([]);
    expect(await page.getByRole('link', { name: 'build-box' }).count()).toBe(0);
    const gone = await fetch(`${sa.url}/api/v1/runners/build-box`, {
      headers: { authorization: `Bearer ${sa.token}` },
    });
    expect(gone.status).toBe(404);
    // The one console line is Chromium's own note on the refused registration's 400.
    expect(operator.errors).toEqual([
      expect.stringMatching(/\/fleet: Failed to load resource: .* 400 \(Bad Request\)$/),
    ]);
  });
});
