import { lstatSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cli,
  scratchDir,
  startStandalone,
  writeDag,
  type Standalone,
} from '../support/processes.js';

/**
 * Issue 10, item 8: two installations on one host must not share a work root (before the fix
 * both used /tmp/leoflow-work, so one installation's tasks and cleanup met the other's
 * attempt directories). Each gets /tmp/leoflow-work-<install id>, the id kept in its data dir,
 * the directory created 0711 and owned by the control plane's user.
 */
let scratch: ReturnType<typeof scratchDir>;
const installs: Standalone[] = [];

const DAG = `dag_id: where
tasks:
  - task_id: pwd
    command: echo "work root $(dirname "$PWD")"
`;

beforeAll(async () => {
  scratch = scratchDir('leoflow-workroot-');
  const dags = join(scratch.dir, 'dags');
  writeDag(dags, 'where', DAG);
  for (const name of ['one', 'two']) {
    installs.push(await startStandalone({ dataDir: join(scratch.dir, name), dagsFolder: dags }));
  }
});

afterAll(async () => {
  for (const s of installs) await s.stop();
  scratch?.cleanup();
});

async function workRootOfTask(s: Standalone): Promise<string> {
  const env = { LEOFLOW_URL: s.url, LEOFLOW_TOKEN: s.token };
  const run = await cli(['runs', 'trigger', 'where', '--wait', '-o', 'json'], env);
  expect(run.code, run.stderr).toBe(0);
  const runId = (JSON.parse(run.stdout) as { run: { run_id: string } }).run.run_id;
  const logs = await cli(['tasks', 'logs', runId, 'pwd', '-o', 'json'], env);
  const line = (JSON.parse(logs.stdout) as { lines: { message: string }[] }).lines
    .map((l) => l.message)
    .find((m) => m.startsWith('work root '));
  expect(line).toBeDefined();
  return line!.slice('work root '.length);
}

describe('every installation has a work root of its own', () => {
  it('two installations on one host run their attempts under different work roots', async () => {
    const roots = await Promise.all(installs.map(workRootOfTask));
    expect(roots[0]).not.toBe(roots[1]);
    for (const [i, s] of installs.entries()) {
      const root = roots[i]!;
      const id = readFileSync(join(s.dataDir, 'install-id'), 'utf8').trim();
      expect(id).toMatch(/^[0-9a-f]{16}$/);
      expect(root).toBe(join(tmpdir(), `leoflow-work-${id}`));
      const st = lstatSync(root);
      expect(st.isDirectory()).toBe(true);
      expect(st.mode & 0o7777).toBe(0o711);
      expect(st.uid).toBe(process.getuid?.());
      expect(s.output()).toContain(`work root    ${root}`);
    }
  });

  it('refuses to start on a work root someone else planted (a symlink)', async () => {
    const dataDir = join(scratch.dir, 'planted');
    mkdirSync(dataDir, { mode: 0o700 });
    const id = 'feedfacecafebeef';
    writeFileSync(join(dataDir, 'install-id'), `${id}\n`, { mode: 0o600 });
    const root = join(tmpdir(), `leoflow-work-${id}`);
    rmSync(root, { recursive: true, force: true });
    const elsewhere = join(scratch.dir, 'attacker-dir');
    mkdirSync(elsewhere);
    symlinkSync(elsewhere, root);
    try {
      const err = await startStandalone({ dataDir }).then(
        async (s) => {
          await s.stop();
          return undefined;
        },
        (e: unknown) => e as Error,
      );
      expect(err?.message).toContain(`${root} (the work root) is a symlink`);
    } finally {
      rmSync(root, { force: true });
    }
    expect(dirname(root)).toBe(tmpdir());
  });
});
