import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cli,
  REPO,
  scratchDir,
  startStandalone,
  writeDag,
  type Standalone,
} from '../support/processes.js';

/**
 * Issue 10, item 9: an installation in a 0700 directory (a checkout under /root) is closed to
 * the uids tasks run as. Node tasks must still `import '@leoflow/sdk'`. The installation here is
 * a copy of this checkout (packages and node_modules hard-linked, so it costs seconds, not a
 * 300 MB copy; the workspace links in node_modules are relative, so they point into the copy)
 * inside a fresh mkdtemp directory, mode 0700, run by a real `leoflow standalone` as root.
 */
const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

let closed: string;
let install: string;
let scratch: ReturnType<typeof scratchDir>;
let sa: Standalone;

beforeAll(async () => {
  closed = mkdtempSync(join(tmpdir(), 'leoflow-closed-'));
  chmodSync(closed, 0o700);
  install = join(closed, 'leoflow');
  execFileSync('mkdir', [install]);
  // -l: hard links, the tree's modes stay as they are; only the 0700 parent closes it off
  execFileSync('cp', ['-al', join(REPO, 'packages'), join(REPO, 'node_modules'), install]);
  copyFileSync(join(REPO, 'package.json'), join(install, 'package.json'));

  scratch = scratchDir('leoflow-sdk-');
  const dags = join(scratch.dir, 'dags');
  writeDag(
    dags,
    'sdk_import',
    `dag_id: sdk_import
tasks:
  - task_id: use_sdk
    type: node
    env: { INSTALL: "${install}" }
    command: |
      import { accessSync } from 'node:fs';
      import { getVariable, taskContext } from '@leoflow/sdk';
      try { accessSync(process.env.INSTALL); console.log('installation: readable'); }
      catch (e) { console.log('installation: ' + e.code); }
      console.log('sdk: ' + typeof getVariable + ' ' + typeof taskContext);
      console.log('uid: ' + process.getuid());
`,
  );
  sa = await startStandalone({
    dataDir: join(scratch.dir, 'data'),
    dagsFolder: dags,
    cliEntry: join(install, 'packages/cli/dist/main.js'),
  });
}, 120_000);

afterAll(async () => {
  await sa?.stop();
  scratch?.cleanup();
  if (closed) rmSync(closed, { recursive: true, force: true });
});

describe.skipIf(!isRoot)('node tasks reach @leoflow/sdk from an installation in a 0700 dir', () => {
  it('imports the SDK while the installation itself stays closed to the task uid', async () => {
    expect(statSync(closed).mode & 0o777).toBe(0o700);
    const env = { LEOFLOW_URL: sa.url, LEOFLOW_TOKEN: sa.token };
    const run = await cli(['runs', 'trigger', 'sdk_import', '--wait', '-o', 'json'], env);
    const runId = (JSON.parse(run.stdout) as { run: { run_id: string } }).run.run_id;
    const logs = await cli(['tasks', 'logs', runId, 'use_sdk', '-o', 'json'], env);
    const lines = (JSON.parse(logs.stdout) as { lines: { message: string }[] }).lines.map(
      (l) => l.message,
    );
    const text = lines.join('\n');
    expect(run.code, text).toBe(0);
    expect(lines, text).toContain('sdk: function function');
    // the setup is what it claims: the task's uid cannot even reach the installation
    // (EACCES under per-attempt uids alone; ENOENT in the namespaced sandbox, whose private /tmp
    // does not even hold the closed copy — the SDK is bind-mounted read-only where tasks look)
    expect(
      lines.filter((l) => l === 'installation: EACCES' || l === 'installation: ENOENT'),
      text,
    ).toHaveLength(1);
    expect(lines.find((l) => l.startsWith('uid: '))).not.toBe('uid: 0');
  });

  it('doctor (run from the closed installation) finds the SDK copy readable by task uids', () => {
    let out: string;
    try {
      out = execFileSync(
        process.execPath,
        [
          join(install, 'packages/cli/dist/main.js'),
          'doctor',
          '--data-dir',
          sa.dataDir,
          '-o',
          'json',
        ],
        { encoding: 'utf8', env: { ...process.env, LEOFLOW_LOG_LEVEL: 'error' } },
      );
    } catch (err) {
      out = String((err as { stdout?: string }).stdout ?? '');
    }
    const report = JSON.parse(out) as {
      checks: { id: string; status: string; message: string }[];
    };
    const sdk = report.checks.find((c) => c.id === 'tasks.sdk_reachable');
    expect(sdk, out).toMatchObject({ status: 'ok' });
  });
});
