import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import {
  cli,
  removeWorkRoots,
  scratchDir,
  startStandalone,
  type Standalone,
} from '../support/processes.js';

/**
 * Lite with its own door (`standalone --door-port 0`), driven through the real CLI: register
 * an inbound runner, take only the printed launch command, reach the door with it, delete the
 * runner, and see the live session closed and the token refused.
 */
describe('runner door in Lite, via the CLI', () => {
  let scratch: { dir: string; cleanup: () => void };
  let s: Standalone;
  const as = (args: string[]) =>
    cli(args, {
      LEOFLOW_URL: s.url,
      LEOFLOW_TOKEN: s.token,
      LEOFLOW_CLI_CONFIG: join(scratch.dir, 'cli.yaml'),
    });

  beforeAll(async () => {
    scratch = scratchDir('leoflow-door-e2e-');
    s = await startStandalone({
      dataDir: join(scratch.dir, 'data'),
      extraArgs: ['--door-port', '0'],
      env: { LEOFLOW_EXECUTION_STANDBY_AGENTS: '0' },
    });
  });
  afterAll(async () => {
    await s?.stop();
    removeWorkRoots(scratch.dir);
    rmSync(scratch.dir, { recursive: true, force: true });
  });

  it('register prints only the launch command; the door accepts it until the runner is deleted', async () => {
    const reg = await as([
      'runners',
      'register',
      'lin-1',
      '--kind',
      'inbound',
      '--labels',
      'gpu=a100',
    ]);
    expect(reg.code, reg.stderr).toBe(0);
    const launch = reg.stdout.trim();
    expect(launch.split('\n')).toHaveLength(1);
    const m =
      /^printf '%s\\n' '(http:\/\/127\.0\.0\.1:\d+\/runners\/(lfr_[A-Za-z0-9_-]{43})\/)' \| leoflow-runner --url-stdin$/.exec(
        launch,
      );
    expect(m, launch).not.toBeNull();
    const base = m![1]!;
    const token = m![2]!;
    expect(reg.stderr).not.toContain(token);
    // the standalone banner names the door, never a token
    expect(s.output()).toContain('runner door');
    const login = await fetch(`${base}login`);
    expect(login.status).toBe(200);
    // the REST port answers nothing under /runners/
    expect((await fetch(`${s.url}/runners/${token}/login`)).status).toBe(404);

    const ws = new WebSocket(`${base.replace('http:', 'ws:')}session`);
    await new Promise<void>((res, rej) => {
      ws.once('open', () => res());
      ws.once('error', rej);
    });
    const closedWith = new Promise<number>((res) => ws.once('close', (code) => res(code)));

    const list = await as(['runners', 'list', '-o', 'json']);
    expect(JSON.parse(list.stdout)).toMatchObject({
      runners: [{ name: 'lin-1', kind: 'inbound' }],
    });
    expect(list.stdout).not.toContain(token);
    const again = await as(['runners', 'get', 'lin-1', '--show-token']);
    expect(again.stdout.trim()).toBe(launch);
    const cells = await as(['cells', 'list', '-o', 'json']);
    expect(JSON.parse(cells.stdout)).toMatchObject({ cells: [{ name: 'lite', implicit: true }] });

    const del = await as(['runners', 'delete', 'lin-1']);
    expect(del.code, del.stderr).toBe(0);
    expect(await closedWith).toBe(4401);
    expect((await fetch(`${base}login`)).status).toBe(401);

    const usage = await as(['runners', 'register', 'x', '--kind', 'ssh']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('--host');
    // the token was never logged
    expect(s.output()).not.toContain(token);
  });
});
