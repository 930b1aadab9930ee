import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cli,
  removeWorkRoots,
  scratchDir,
  startStandalone,
  waitFor,
  writeDag,
  type Standalone,
} from '../support/processes.js';
import {
  fingerprintOf,
  generateKeyPair,
  SSHD,
  SSHD_HOWTO,
  sshdAvailability,
  startSshd,
  type Sshd,
} from '../support/sshd.js';

/**
 * Lite standalone with an ssh runner on Debian's sshd on loopback, registered with the CLI: the
 * control plane dials it (the credential from the vault Connection the record names), uploads
 * the runner bundle over the SSH channel and speaks the runner protocol over its stdio. A task
 * with `executor: runner` runs there and succeeds with its log visible; a canary Variable reaches
 * only the declaring task (not the machine's process listing, a log, sshd's log or an API reply);
 * a runner pinned to another host key is refused with LF_SSH_HOST_KEY_MISMATCH and runs nothing.
 */
const availability = sshdAvailability();
const CANARY = `canary-${Math.random().toString(36).slice(2)}-ssh-e2e`;
const uploaded = () => {
  try {
    return new Set(readdirSync(join(homedir(), '.leoflow')).filter((f) => f.startsWith('runner-')));
  } catch {
    return new Set<string>();
  }
};

describe.runIf(availability !== 'skip')('ssh runner end to end (Lite, loopback sshd)', () => {
  let scratch: { dir: string; cleanup: () => void };
  let s: Standalone;
  let sshd: Sshd;
  let before: Set<string>;
  const seen: string[] = [];
  const as = async (args: string[]) => {
    const r = await cli(
      args,
      {
        LEOFLOW_URL: s.url,
        LEOFLOW_TOKEN: s.token,
        LEOFLOW_CLI_CONFIG: join(scratch.dir, 'cli.yaml'),
      },
      120_000,
    );
    seen.push(r.stdout, r.stderr);
    return r;
  };
  const register = (name: string, hostKey: string, pool: string) =>
    as([
      'runners',
      'register',
      name,
      '--kind',
      'ssh',
      '--labels',
      `pool=${pool}`,
      '--host',
      '127.0.0.1',
      '--port',
      String(sshd.port),
      '--user',
      sshd.user,
      '--credential',
      'ssh_key',
      '--host-key',
      hostKey,
    ]);
  const trigger = async (dag: string) => {
    const t = await as(['runs', 'trigger', dag, '-o', 'json']);
    expect(t.code, t.stderr).toBe(0);
    return (JSON.parse(t.stdout) as { run_id: string }).run_id;
  };
  const detail = async (runId: string) =>
    JSON.parse((await as(['runs', 'show', runId, '-o', 'json'])).stdout) as {
      run: { state: string };
      task_instances: { task_id: string; state: string }[];
    };
  const logs = async (runId: string, task: string) =>
    (
      JSON.parse((await as(['tasks', 'logs', runId, task, '-o', 'json'])).stdout) as {
        lines: { message: string }[];
      }
    ).lines.map((l) => l.message);

  beforeAll(async () => {
    if (availability === 'missing') throw new Error(`${SSHD} is missing: ${SSHD_HOWTO}`);
    before = uploaded();
    sshd = await startSshd();
    scratch = scratchDir('leoflow-ssh-e2e-');
    s = await startStandalone({
      dataDir: join(scratch.dir, 'data'),
      extraArgs: ['--secret-scoping', 'enforce'],
      env: { LEOFLOW_EXECUTION_STANDBY_AGENTS: '0' },
    });
    const conn = await as([
      'connections',
      'set',
      'ssh_key',
      '--conn-type',
      'ssh',
      '--extra',
      JSON.stringify({ private_key: sshd.client.privateKey }),
    ]);
    expect(conn.code, conn.stderr).toBe(0);
    expect((await as(['variables', 'set', 'canary_var', CANARY])).code).toBe(0);
    const dags = join(scratch.dir, 'dags');
    writeDag(
      dags,
      'on_ssh',
      `dag_id: on_ssh
tasks:
  - task_id: declares
    executor: runner
    runner_labels: { pool: ssh }
    variables: [canary_var]
    command: |
      if [ "$AIRFLOW_VAR_CANARY_VAR" = "${CANARY}" ]; then echo "declares: has the variable"; fi
      echo "declares: on the ssh runner"
      sleep 3
  - task_id: other
    executor: runner
    runner_labels: { pool: ssh }
    depends_on: [declares]
    command: |
      if env | grep -q '^AIRFLOW_VAR_CANARY_VAR='; then echo "other: has the variable"; else echo "other: no variable"; fi
`,
    );
    writeDag(
      dags,
      'on_bad_key',
      `dag_id: on_bad_key
tasks:
  - task_id: never
    executor: runner
    runner_labels: { pool: bad }
    command: echo must-not-run
`,
    );
    for (const d of ['on_ssh', 'on_bad_key']) {
      const push = await as(['dags', 'push', join(dags, d)]);
      expect(push.code, push.stderr).toBe(0);
    }
    seen.length = 0;
  }, 90_000);

  afterAll(async () => {
    await s?.stop();
    await sshd?.stop();
    // the bundle this test uploaded into the ssh user's ~/.leoflow (content-addressed)
    for (const f of uploaded()) if (!before.has(f)) rmSync(join(homedir(), '.leoflow', f));
    if (scratch) removeWorkRoots(scratch.dir);
    scratch?.cleanup();
  });

  it('registered with the CLI, the cell dials it and a runner task runs there; the canary reaches only the declaring task', async () => {
    const reg = await register('ssh-1', sshd.knownHostsLine, 'ssh');
    expect(reg.code, reg.stderr).toBe(0);
    const runId = await trigger('on_ssh');

    await waitFor(
      'the declaring task to run on the ssh runner',
      async () =>
        (await detail(runId)).task_instances.find((t) => t.task_id === 'declares')?.state ===
        'running'
          ? true
          : undefined,
      60_000,
    ).catch((e: unknown) => {
      throw new Error(`${String(e)}\n${s.output().slice(-4000)}\n${sshd.log().slice(-2000)}`);
    });
    // the machine's side: the daemon runs under sshd with --stdio, and nothing lists the canary
    const ps = spawnSync('ps', ['-eo', 'pid,args'], { encoding: 'utf8' }).stdout;
    expect(ps).toMatch(/\.leoflow\/runner-[0-9a-f]{24}\.cjs --stdio/);
    expect(ps).not.toContain(CANARY);
    const cmdlines = readdirSync('/proc')
      .filter((d) => /^\d+$/.test(d))
      .map((pid) => {
        try {
          return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
        } catch {
          return '';
        }
      });
    expect(cmdlines.join('\n')).not.toContain(CANARY);

    const done = await waitFor(
      'the run to end',
      async () => {
        const d = await detail(runId);
        return d.run.state === 'success' || d.run.state === 'failed' ? d : undefined;
      },
      90_000,
    );
    expect(done.run.state, s.output().slice(-4000)).toBe('success');
    const declares = await logs(runId, 'declares');
    expect(declares).toContain('declares: has the variable');
    expect(declares).toContain('declares: on the ssh runner');
    expect(await logs(runId, 'other')).toContain('other: no variable');

    expect(sshd.log()).toMatch(/Accepted publickey/);
    for (const hay of [seen.join('\n'), s.output(), sshd.log()]) {
      expect(hay).not.toContain(CANARY);
      expect(hay).not.toContain(sshd.client.privateKey.split('\n')[1]!);
    }
  }, 180_000);

  it('a runner pinned to another host key is refused with a clear error and runs nothing', async () => {
    const other = generateKeyPair(scratch.dir, 'not_the_host');
    const accepted = () => (sshd.log().match(/Accepted publickey/g) ?? []).length;
    const acceptedBefore = accepted();
    const reg = await register('ssh-bad', fingerprintOf(scratch.dir, other.publicKey), 'bad');
    expect(reg.code, reg.stderr).toBe(0);
    const runId = await trigger('on_bad_key');
    await waitFor(
      'the dial to be refused',
      async () => (s.output().includes('LF_SSH_HOST_KEY_MISMATCH') ? true : undefined),
      30_000,
    );
    expect(s.output()).toMatch(/ssh-bad/);
    // it waits for a runner; nothing ran and sshd let no new key in
    await new Promise((r) => setTimeout(r, 1_500));
    const d = await detail(runId);
    expect(d.task_instances[0]!.state).toBe('queued');
    expect(await logs(runId, 'never')).not.toContain('must-not-run');
    expect(accepted()).toBe(acceptedBefore);
  }, 90_000);

  it('deleting the runner hangs up its session: the daemon on the machine ends and is not dialed again', async () => {
    const onMachine = () =>
      /\.leoflow\/runner-[0-9a-f]{24}\.cjs --stdio/.test(
        spawnSync('ps', ['-eo', 'args'], { encoding: 'utf8' }).stdout,
      );
    expect(onMachine()).toBe(true);
    const accepted = () => (sshd.log().match(/Accepted publickey/g) ?? []).length;
    expect((await as(['runners', 'delete', 'ssh-1'])).code).toBe(0);
    await waitFor('the daemon to end', async () => (onMachine() ? undefined : true), 20_000);
    const after = accepted();
    await new Promise((r) => setTimeout(r, 2_500));
    expect(accepted()).toBe(after);
    expect(onMachine()).toBe(false);
  }, 60_000);
});
