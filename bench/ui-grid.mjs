#!/usr/bin/env node
// The web app's grid: time to interactive of the DAG page with 100 runs × 20 tasks in headless
// Chromium (Debian's /usr/bin/chromium through playwright-core), beside same-run baselines: the
// app's not-found page (the app shell and whoami, no data) and the same DAG page for a DAG with no
// runs. The 2,000 task instances are seeded straight into the standalone's SQLite store (a paused
// DAG, runs marked success), so nothing executes.
//
//   node bench/ui-grid.mjs [--loads 7] [--runs 100] [--tasks 20]
//
// "Interactive" = navigation start → the last grid cell is in the DOM and the main thread has
// run one frame and one task after it (performance.now() in the page, so the browser's own
// clock). Median of --loads fresh navigations each; prints one JSON object.
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import {
  api,
  cleanupAll,
  REPO,
  round,
  startStandalone,
  summary,
  tempDir,
  writeDag,
} from './lib.mjs';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const LOADS = arg('loads', 7);
const RUNS = arg('runs', 100);
const TASKS = arg('tasks', 20);
const CHROMIUM = process.env.LEOFLOW_CHROMIUM ?? '/usr/bin/chromium';

const taskIds = Array.from({ length: TASKS }, (_, i) => `t${String(i).padStart(2, '0')}`);
function dagYaml(dagId, n) {
  const tasks = taskIds
    .slice(0, n)
    .map(
      (t, i) =>
        `  - task_id: ${t}\n    command: "true"\n${i > 0 ? `    depends_on: [${taskIds[i - 1]}]\n` : ''}`,
    )
    .join('');
  return `dag_id: ${dagId}\ntasks:\n${tasks}`;
}

async function seed(sa, dagId) {
  const { openStore } = await import(join(REPO, 'packages/server/dist/store/open-store.js'));
  const store = await openStore({ kind: 'sqlite', file: join(sa.dataDir, 'leoflow.db') });
  try {
    const dag = await api(sa, 'GET', `/api/v1/dags/${dagId}`);
    const t0 = Date.now() - RUNS * 60_000;
    for (let r = 0; r < RUNS; r++) {
      const start = t0 + r * 60_000;
      const run = await store.createRun({
        tenant_id: 'default',
        dag_id: dagId,
        run_id: `bench_${String(r).padStart(3, '0')}`,
        run_type: 'manual',
        dag_version: dag.dag.current_version,
        logical_date: null,
        data_interval_start: null,
        data_interval_end: null,
        conf: {},
        tasks: taskIds.map((task_id) => ({ task_id, max_tries: 1 })),
        now: start,
      });
      await store.setRunState(run.id, ['queued', 'running'], 'success', {
        started_at: start,
        ended_at: start + TASKS * 1000,
      });
      const tis = await store.listTaskInstances(run.id);
      for (const ti of tis) {
        const i = taskIds.indexOf(ti.task_id);
        const state = (r * 7 + i) % 53 === 0 ? 'failed' : 'success';
        await store.updateTaskInstance(
          ti.id,
          { states: [ti.state] },
          { state, started_at: start + i * 1000, ended_at: start + i * 1000 + 900 },
          start,
        );
      }
    }
  } finally {
    await store.close();
  }
}

async function timeToInteractive(page, url, readySelector) {
  const out = [];
  let requests = 0;
  const count = (r) => {
    if (new URL(r.url()).pathname.startsWith('/api/v1/')) requests++;
  };
  for (let i = 0; i < LOADS; i++) {
    requests = 0;
    page.on('request', count);
    await page.goto(url, { waitUntil: 'commit' });
    await page.waitForSelector(readySelector, { timeout: 60_000 });
    const t = await page.evaluate(
      () =>
        new Promise((resolve) =>
          requestAnimationFrame(() => setTimeout(() => resolve(performance.now()), 0)),
        ),
    );
    page.off('request', count);
    out.push(t);
    await page.goto('about:blank');
  }
  return { ms: summary(out), api_requests_last_load: requests };
}

try {
  const data = tempDir('leoflow-bench-ui-grid-dags-');
  writeDag(data.dir, 'grid_bench', dagYaml('grid_bench', TASKS));
  writeDag(data.dir, 'grid_empty', dagYaml('grid_empty', TASKS));
  const sa = await startStandalone({ dagsFolder: data.dir, label: 'ui-grid' });
  for (const d of ['grid_bench', 'grid_empty'])
    await api(sa, 'PATCH', `/api/v1/dags/${d}`, { is_paused: true });
  await seed(sa, 'grid_bench');
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-background-networking'],
  });
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await page.goto(`${sa.url}/sign-in`);
    await page.getByLabel('API token').fill(sa.token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'DAGs' }).waitFor();
    const last = `bench_${String(RUNS - 1).padStart(3, '0')}`;
    // warm the server's caches and the browser's asset cache alike for every phase
    await page.goto(`${sa.url}/dags/grid_bench?runs=${RUNS}`);
    await page.waitForSelector(`[data-testid="cell-${last}-${taskIds[TASKS - 1]}"]`);
    const emptyApp = await timeToInteractive(
      page,
      `${sa.url}/no/such/page`,
      'h1:text("Page not found")',
    );
    const emptyGrid = await timeToInteractive(
      page,
      `${sa.url}/dags/grid_empty?runs=${RUNS}`,
      'p.empty:text("No runs yet")',
    );
    const fullGrid = await timeToInteractive(
      page,
      `${sa.url}/dags/grid_bench?runs=${RUNS}`,
      `[data-testid="cell-${last}-${taskIds[TASKS - 1]}"]`,
    );
    const gridReply = await fetch(`${sa.url}/api/v1/dags/grid_bench/grid?limit=${RUNS}`, {
      headers: { authorization: `Bearer ${sa.token}` },
    });
    const body = await gridReply.text();
    process.stdout.write(
      `${JSON.stringify(
        {
          runs: RUNS,
          tasks: TASKS,
          loads: LOADS,
          time_to_interactive_ms: {
            baseline_app_not_found_page: emptyApp,
            baseline_dag_page_no_runs: emptyGrid,
            [`dag_page_${RUNS}_runs_x_${TASKS}_tasks`]: fullGrid,
          },
          grid_reply_bytes: body.length,
          grid_reply_bytes_gzip: round((await import('node:zlib')).gzipSync(body).length, 0),
        },
        null,
        2,
      )}\n`,
    );
  } finally {
    await browser.close();
    await sa.stop();
  }
} finally {
  await cleanupAll();
}
