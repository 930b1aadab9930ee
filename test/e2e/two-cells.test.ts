import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  adminToken,
  freePort,
  startReplica,
  vaultKey,
  type Replica,
} from '../support/pro-cluster.js';
import { freshPostgresDatabase } from '../support/postgres-database.js';
import {
  CLI,
  cli,
  REPO,
  removeWorkRoots,
  scratchDir,
  waitFor,
  writeDag,
} from '../support/processes.js';

/**
 * Two cells as two `leoflow server` processes on one PostgreSQL database — each its own store
 * schema (--database-schema), both the one directory schema — and one `leoflow door` process on
 * that directory. The default tenant's inbound runner is registered through cell A with the
 * CLI and started with nothing but the printed command; a DAG with `executor: runner` runs on
 * it in cell A; the tenant is placed on cell B, cell A's old session is closed on command, the
 * daemon reconnects through the door to cell B, and the same DAG (pushed to B by the operator:
 * a move moves no data) runs there. No process prints the runner token.
 */
const DAG = `dag_id: on_runner
tasks:
  - task_id: t
    executor: runner
    command: echo "ran on the runner in $(pwd)"
`;

describe('two cells and one door, all real processes', () => {
  let scratch: { dir: string; cleanup: () => void };
  let db: { url: string; drop: () => Promise<void> };
  let door: ChildProcess;
  let doorOut = '';
  let doorUrl = '';
  const cells: Record<'a' | 'b', { r: Replica; token: string; cellUrl: string }> = {} as never;
  const daemons: ChildProcess[] = [];
  let bin: string;
  const seen: string[] = [];

  const as = async (cell: 'a' | 'b', args: string[]) => {
    const c = cells[cell];
    const r = await cli(args, {
      LEOFLOW_URL: c.r.url,
      LEOFLOW_TOKEN: c.token,
      LEOFLOW_CLI_CONFIG: join(scratch.dir, 'cli.yaml'),
    });
    seen.push(r.stdout, r.stderr);
    return r;
  };

  function launch(command: string) {
    const proc = spawn('/bin/sh', [], {
      env: { PATH: `${bin}:${process.env.PATH ?? ''}`, HOME: scratch.dir },
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
    });
    proc.stdin.end(`${command}\n`);
    let out = '';
    proc.stdout.on('data', (b: Buffer) => (out += b.toString()));
    proc.stderr.on('data', (b: Buffer) => (out += b.toString()));
    daemons.push(proc);
    const exit = new Promise<number>((r) => proc.once('exit', (c) => r(c ?? -1)));
    return { proc, output: () => out, exit };
  }

  beforeAll(async () => {
    scratch = scratchDir('leoflow-two-cells-');
    bin = join(scratch.dir, 'bin');
    mkdirSync(bin);
    symlinkSync(join(REPO, 'packages/cli/bin/leoflow-runner.mjs'), join(bin, 'leoflow-runner'));
    db = await freshPostgresDatabase('cells');
    // The door first: the cells trust its public keys file.
    door = spawn(
      process.execPath,
      [
        CLI,
        'door',
        '--data-dir',
        join(scratch.dir, 'door'),
        '--port',
        '0',
        '--database-url',
        db.url,
      ],
      { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    door.stdout!.on('data', (b: Buffer) => (doorOut += b.toString()));
    door.stderr!.on('data', (b: Buffer) => (doorOut += b.toString()));
    doorUrl = await waitFor('the door to start', async () => {
      const m = /runners\s+(http:\/\/\S+?)\/runners\//.exec(doorOut);
      if (door.exitCode !== null) throw new Error(`door exited:\n${doorOut}`);
      return m?.[1];
    });
    const keysFile = /public keys\s+(\S+)/.exec(doorOut)![1]!;
    for (const name of ['a', 'b'] as const) {
      const cellPort = await freePort();
      const agentPort = await freePort();
      const r = await startReplica(
        {
          name: `cell-${name}`,
          role: 'all',
          root: scratch.dir,
          keysDir: join(scratch.dir, `keys-${name}`),
          databaseUrl: db.url,
          agentServiceUrl: `http://127.0.0.1:${agentPort}`,
          env: { LEOFLOW_SECRET_KEY: vaultKey() },
          lease: ['6s', '1s', '2s'],
          extraArgs: [
            '--database-schema',
            `cell_${name}`,
            '--cell-name',
            `cell-${name}`,
            '--cell-port',
            String(cellPort),
            '--door-keys-file',
            keysFile,
            '--door-url',
            doorUrl,
          ],
        },
        { http: await freePort(), agent: agentPort },
      );
      cells[name] = {
        r,
        token: adminToken(join(scratch.dir, `keys-${name}`)),
        cellUrl: `http://127.0.0.1:${cellPort}`,
      };
    }
    // The cells and the placement live in the directory: either cell's API writes them.
    expect((await as('a', ['cells', 'add', 'cell-a', cells.a.cellUrl])).code).toBe(0);
    expect((await as('a', ['cells', 'add', 'cell-b', cells.b.cellUrl])).code).toBe(0);
    expect((await as('a', ['tenants', 'place', 'default', 'cell-a'])).code).toBe(0);
  }, 120_000);

  afterAll(async () => {
    for (const d of daemons) if (d.exitCode === null && d.pid) process.kill(-d.pid, 'SIGTERM');
    for (const c of Object.values(cells)) await c.r.stop();
    if (door && door.exitCode === null) {
      const gone = new Promise((r) => door.once('exit', r));
      door.kill('SIGTERM');
      await gone;
    }
    await db?.drop();
    removeWorkRoots(scratch.dir);
    rmSync(scratch.dir, { recursive: true, force: true });
  });

  async function runOn(cell: 'a' | 'b', daemonOutput: () => string) {
    const trig = await as(cell, ['runs', 'trigger', 'on_runner', '--wait', '-o', 'json']);
    expect(
      trig.code,
      `${trig.stderr}\n${daemonOutput()}\n${cells[cell].r.output().slice(-3000)}`,
    ).toBe(0);
    const runId = (JSON.parse(trig.stdout) as { run: { run_id: string } }).run.run_id;
    const logs = await as(cell, ['tasks', 'logs', runId, 't', '-o', 'json']);
    expect(logs.code, `${logs.stderr}\n${logs.stdout}`).toBe(0);
    return (JSON.parse(logs.stdout) as { lines: { message: string }[] }).lines.map(
      (l) => l.message,
    );
  }

  it('runs on cell A, follows the move to cell B, and is refused after delete with the old token', async () => {
    // the operator's part of a move: the DAG exists in each cell (its own dags folder / push)
    for (const name of ['a', 'b'] as const) {
      const dir = writeDag(join(scratch.dir, `src-${name}`), 'on_runner', DAG);
      const push = await as(name, ['dags', 'push', dir]);
      expect(push.code, push.stderr).toBe(0);
    }
    const reg = await as('a', ['runners', 'register', 'lin-1', '--kind', 'inbound']);
    expect(reg.code, reg.stderr).toBe(0);
    const command = reg.stdout.trim();
    expect(command).toContain(`${doorUrl}/runners/`);
    const token = /\/runners\/(lfr_[A-Za-z0-9_-]{43})\//.exec(command)![1]!;
    const daemon = launch(command);

    expect(await runOn('a', daemon.output)).toContainEqual(
      expect.stringContaining('ran on the runner'),
    );

    // Move: new sessions go to B; the live session on A is closed on command, the daemon
    // reconnects through the door and lands on B.
    expect((await as('a', ['tenants', 'place', 'default', 'cell-b'])).code).toBe(0);
    const drain = await as('a', ['cells', 'drain', 'cell-a', '-o', 'json']);
    expect(drain.code, drain.stderr).toBe(0);
    expect(await runOn('b', daemon.output)).toContainEqual(
      expect.stringContaining('ran on the runner'),
    );
    expect(daemon.proc.exitCode).toBeNull();

    // Delete and re-register (through cell B, where the tenant now lives).
    const exited = daemon.exit;
    expect((await as('b', ['runners', 'delete', 'lin-1'])).code).toBe(0);
    expect(await exited).toBe(3);
    const stale = launch(command);
    expect(await stale.exit).toBe(3);
    expect(stale.output()).toMatch(/refused the runner token \(401\)/);
    const again = await as('b', ['runners', 'register', 'lin-1', '--kind', 'inbound']);
    expect(again.code, again.stderr).toBe(0);
    const fresh = launch(again.stdout.trim());
    expect(await runOn('b', fresh.output)).toContainEqual(
      expect.stringContaining('ran on the runner'),
    );
    const newToken = /\/runners\/(lfr_[A-Za-z0-9_-]{43})\//.exec(again.stdout)![1]!;

    // No token in any process's output (the CLI's register replies are the only place).
    for (const t of [token, newToken]) {
      expect(doorOut).not.toContain(t);
      expect(cells.a.r.output()).not.toContain(t);
      expect(cells.b.r.output()).not.toContain(t);
      expect(daemon.output()).not.toContain(t);
      expect(fresh.output()).not.toContain(t);
    }
  }, 240_000);
});
