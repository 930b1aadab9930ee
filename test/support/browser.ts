import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM = process.env.LEOFLOW_CHROMIUM ?? '/usr/bin/chromium';

/**
 * Whether the browser tests run here. Without chromium a plain `npm test` skips them with a note
 * (as it does the PostgreSQL half without a server); under CI (CI=true) or with
 * LEOFLOW_TEST_REQUIRE_BROWSER=1 a missing browser is a failure that says how to install it.
 */
export function browserAvailability(): 'run' | 'skip' | 'missing' {
  if (existsSync(CHROMIUM)) return 'run';
  const required = process.env.CI === 'true' || process.env.LEOFLOW_TEST_REQUIRE_BROWSER === '1';
  return required ? 'missing' : 'skip';
}

export const BROWSER_HOWTO = `run scripts/dev-services.sh (it installs Debian's chromium) or point LEOFLOW_CHROMIUM at a Chromium binary`;

/** Flags for a closed network: nothing phones home, nothing updates, no QUIC probing. */
const FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface CapturedResponse {
  method: string;
  url: string;
  status: number;
  contentType: string;
  body: string;
}

export interface Browser {
  context: BrowserContext;
  /** every console error and uncaught page error, with the page URL it happened on */
  errors: string[];
  /** every response body the pages received (the live stream excepted: it never ends) */
  responses: CapturedResponse[];
  /** resolves once every response seen so far is in `responses` (their bodies arrive later) */
  settled(): Promise<void>;
  newPage(): Promise<Page>;
  close(): Promise<void>;
}

/** Debian's chromium, headless, with a fresh profile; records errors and responses. */
export async function launchBrowser(
  opts: { colorScheme?: 'light' | 'dark' } = {},
): Promise<Browser> {
  const profile = mkdtempSync(join(tmpdir(), 'leoflow-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    colorScheme: opts.colorScheme ?? 'light',
    viewport: { width: 1280, height: 900 },
  });
  const errors: string[] = [];
  const responses: CapturedResponse[] = [];
  const pending: Promise<void>[] = [];
  const watch = (page: Page) => {
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(`${page.url()}: ${m.text()}`);
    });
    page.on('pageerror', (e) => errors.push(`${page.url()}: ${e.message}`));
  };
  context.on('page', watch);
  for (const p of context.pages()) watch(p);
  context.on('response', (r) => {
    const contentType = r.headers()['content-type'] ?? '';
    if (contentType.includes('text/event-stream')) return;
    pending.push(
      r
        .text()
        .then(
          (body) =>
            void responses.push({
              method: r.request().method(),
              url: r.url(),
              status: r.status(),
              contentType,
              body,
            }),
        )
        .catch(() => undefined),
    );
  });
  return {
    context,
    errors,
    responses,
    async settled() {
      await Promise.allSettled(pending);
    },
    async newPage() {
      const existing = context.pages()[0];
      return existing && existing.url() === 'about:blank' ? existing : context.newPage();
    },
    async close() {
      await Promise.allSettled(pending);
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

const axeSource = readFileSync(
  createRequire(import.meta.url).resolve('axe-core/axe.min.js'),
  'utf8',
);

/**
 * Runs axe-core in the page (evaluated over the debugging protocol, so the page's CSP — which
 * forbids injected scripts, rightly — stays on) and returns the serious and critical violations.
 */
export async function accessibilityViolations(page: Page): Promise<string[]> {
  await page.evaluate(axeSource);
  const out = await page.evaluate<string[]>(
    `axe.run(document, { resultTypes: ['violations'] }).then(r => r.violations
       .filter(v => v.impact === 'serious' || v.impact === 'critical')
       .map(v => v.id + ': ' + v.help + ' (' + v.nodes.length + ' nodes: ' + v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(', ') + ')'))`,
  );
  return out;
}
