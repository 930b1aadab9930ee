import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cli,
  REPO,
  removeWorkRoots,
  scratchDir,
  startStandalone,
  waitFor,
  writeDag,
  type Standalone,
} from '../support/processes.js';

/**
 * Lite with its own door, the real CLI and the real `leoflow-runner`, started with nothing but
 * the command the registration printed: tasks with `executor: runner` wait for it (shown as such
 * in `runs show`), run on it with their own attempt tokens, and a canary Variable reaches only
 * the task that declares it — in no log, no API reply, no process listing and not the runner's
 * own output. Deleting the runner closes its session and stops the daemon; the old command is
 * refused and a new registration works.
 */
const CANARY = `canary-${Math.random().toString(36).slice(2)}-runner-e2e`;

describe('runner daemon end to end (Lite, one door)', () => {
  let scratch: { dir: string; cleanup: () => void };
  let s: Standalone;
  let bin: string;
  const daemons: ChildProcess[] = [];
  const launched = new Map<ChildProcess, string>();
  const seen: string[] = [];
  const as = async (args: string[], input?: string) => {
    const r = await cli(
      args,
      {
        LEOFLOW_URL: s.url,
        LEOFLOW_TOKEN: s.token,
        LEOFLOW_CLI_CONFIG: join(scratch.dir, 'cli.yaml'),
      },
      120_000,
      input,
    );
    seen.push(r.stdout, r.stderr);
    return r;
  };

  /**
   * Runs the printed launch command in a shell, with `leoflow-runner` on PATH. The shell reads it
   * from its stdin, as from a script or a terminal: `sh -c '<command>'` would put the token in
   * the shell's own argv, which is the caller's doing, not the launch command's.
   */
  function launch(command: string): {
    proc: ChildProcess;
    output: () => string;
    exit: Promise<number>;
  } {
    const proc = spawn('/bin/sh', [], {
      env: { PATH: `${bin}:${process.env.PATH ?? ''}`, HOME: scratch.dir },
      stdio: ['pipe', 'pipe', 'pipe'],
      // its own process group, so a stop reaches the daemon, not only the shell
      detached: true,
    });
    proc.stdin.end(`${command}\n`);
    launched.set(proc, command);
    let out = '';
    proc.stdout.on('data', (b: Buffer) => (out += b.toString()));
    proc.stderr.on('data', (b: Buffer) => (out += b.toString()));
    daemons.push(proc);
    const exit = new Promise<number>((r) => proc.once('exit', (c) => r(c ?? -1)));
    return { proc, output: () => out, exit };
  }

  beforeAll(async () => {
    scratch = scratchDir('leoflow-runner-e2e-');
    bin = join(scratch.dir, 'bin');
    mkdirSync(bin);
    symlinkSync(join(REPO, 'packages/cli/bin/leoflow-runner.mjs'), join(bin, 'leoflow-runner'));
    s = await startStandalone({
      dataDir: join(scratch.dir, 'data'),
      extraArgs: ['--door-port', '0', '--secret-scoping', 'enforce'],
      env: { LEOFLOW_EXECUTION_STANDBY_AGENTS: '0' },
    });
    expect((await as(['variables', 'set', 'canary_var', CANARY])).code).toBe(0);
    const dags = join(scratch.dir, 'dags');
    writeDag(
      dags,
      'on_runner',
      `dag_id: on_runner
tasks:
  - task_id: declares
    executor: runner
    runner_labels: { pool: e2e }
    variables: [canary_var]
    command: |
      if [ -n "$AIRFLOW_VAR_CANARY_VAR" ]; then echo "declares: has the variable"; fi
      echo "declares: uid $(id -u) in $(pwd)"
      sleep 4
  - task_id: other
    executor: runner
    depends_on: [declares]
    command: |
      if env | grep -q '^AIRFLOW_VAR_CANARY_VAR='; then echo "other: has the variable"; else echo "other: no variable"; fi
`,
    );
    expect((await as(['dags', 'push', join(dags, 'on_runner')])).code).toBe(0);
    // `variables set` echoes what it was just given; from here on, nothing may show it
    seen.length = 0;
  }, 60_000);

  afterAll(async () => {
    for (const d of daemons) if (d.exitCode === null && d.pid) process.kill(-d.pid, 'SIGTERM');
    await s?.stop();
    removeWorkRoots(scratch.dir);
    rmSync(scratch.dir, { recursive: true, force: true });
  });

  /** `runners register lin-1` (inbound, pool=e2e): its output is the launch command. */
  async function register(...extra: string[]) {
    const reg = await as([
      'runners',
      'register',
      'lin-1',
      '--kind',
      'inbound',
      '--labels',
      'pool=e2e',
      ...extra,
    ]);
    expect(reg.code, reg.stderr).toBe(0);
    return reg;
  }

  async function runShow(runId: string): Promise<string> {
    return (await as(['runs', 'show', runId])).stdout;
  }

  it('waits for a runner, runs on it from the printed command only, and the canary reaches only the declaring task', async () => {
    // Triggered before any runner exists: it waits, and `runs show` says for what.
    const trig = await as(['runs', 'trigger', 'on_runner', '-o', 'json']);
    expect(trig.code, trig.stderr).toBe(0);
    const runId = (JSON.parse(trig.stdout) as { run_id: string }).run_id;
    await waitFor('the first task to be queued for a runner', async () =>
      (await runShow(runId)).includes('queued (waiting for a runner)') ? true : undefined,
    );

    const reg = await register('--capacity', '2');
    const command = reg.stdout.trim();
    const token = /\/runners\/(lfr_[A-Za-z0-9_-]{43})\//.exec(command)![1]!;
    const daemon = launch(command);

    // While the declaring task runs, no process listing shows the canary or the token.
    await waitFor('the declaring task to run', async () =>
      /^declares +running/m.test(await runShow(runId)) ? true : undefined,
    ).catch(async (e: unknown) => {
      throw new Error(
        `${String(e)}\n${daemon.output()}\n${await runShow(runId)}\n${s.output().slice(-3000)}`,
      );
    });
    const ps = spawnSync('ps', ['-eo', 'pid,args'], { encoding: 'utf8' }).stdout;
    expect(ps).toContain('leoflow-runner');
    expect(ps).not.toContain(CANARY);
    expect(ps).not.toContain(token);

    const done = await waitFor(
      'the run to end',
      async () => {
        const r = await as(['runs', 'show', runId, '-o', 'json']);
        const detail = JSON.parse(r.stdout) as { run: { state: string } };
        return detail.run.state === 'success' || detail.run.state === 'failed' ? detail : undefined;
      },
      90_000,
    );
    expect(done.run.state, daemon.output()).toBe('success');
    const logs = async (task: string) =>
      (
        JSON.parse((await as(['tasks', 'logs', runId, task, '-o', 'json'])).stdout) as {
          lines: { message: string }[];
        }
      ).lines.map((l) => l.message);
    const declares = await logs('declares');
    expect(declares).toContain('declares: has the variable');
    // as root each attempt has a uid of its own, in a fresh, empty work dir
    const uidLine = declares.find((l) => l.startsWith('declares: uid'))!;
    if (process.getuid?.() === 0) expect(uidLine).not.toMatch(/uid 0 /);
    const workdir = /in (\S+)$/.exec(uidLine)![1]!;
    expect(workdir).toMatch(/leoflow-runner-[^/]+\/attempt-/);
    expect(existsSync(workdir)).toBe(false);
    expect(await logs('other')).toContain('other: no variable');

    // Nowhere: not in a log, an API/CLI reply, nor the runner's own output.
    expect(seen.join('\n')).not.toContain(CANARY);
    expect(daemon.output()).not.toContain(CANARY);
    expect(daemon.output()).not.toContain(token);
    expect(s.output()).not.toContain(CANARY);
    expect(s.output()).not.toContain(token);
  }, 150_000);

  it('delete closes the live session and stops the daemon; the old command is refused, a new registration works', async () => {
    const daemon = daemons[0]!;
    expect(daemon.exitCode).toBeNull();
    const exited = new Promise<number>((r) => daemon.once('exit', (c) => r(c ?? -1)));
    expect((await as(['runners', 'delete', 'lin-1'])).code).toBe(0);
    expect(await exited).toBe(3);

    const reg = await register();
    // the old token: refused at the door (401), and the daemon says so and stops
    const old = launched.get(daemons[0]!)!;
    const stale = launch(old);
    expect(await stale.exit).toBe(3);
    expect(stale.output()).toMatch(/refused the runner token \(401\)/);

    const fresh = launch(reg.stdout.trim());
    const trig = await as(['runs', 'trigger', 'on_runner', '--wait', '-o', 'json']);
    expect(trig.code, `${trig.stderr}\n${fresh.output()}`).toBe(0);
    // SIGTERM to the daemon (its shell's group): it stops taking work and exits
    process.kill(-fresh.proc.pid!, 'SIGTERM');
    await fresh.exit;
    await waitFor('the daemon to exit', async () =>
      spawnSync('ps', ['-eo', 'args'], { encoding: 'utf8' }).stdout.includes(bin)
        ? undefined
        : true,
    );
  }, 150_000);
});
