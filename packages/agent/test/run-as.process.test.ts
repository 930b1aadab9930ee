import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LogStream, ReportedState, TaskType } from '@leoflow/protocol';
import { defaultSpec, FakeAgentService } from './support/fake-agent-service.js';
import { assertAgentBuilt, spawnAgent } from './support/spawn-agent.js';

const isRoot = process.getuid?.() === 0;
const NOBODY = 65534;

if (!isRoot) {
  console.warn(
    `[agent run-as tests] SKIPPED: they need root (uid 0) to spawn the task as uid/gid ${NOBODY}; ` +
      `this run has uid ${process.getuid?.()}`,
  );
}

/**
 * Lite with LEOFLOW_RUN_AS_UID/GID: the control plane and the agent run as root, the task as an
 * unprivileged user. The task must reach neither the control plane's data nor the agent's
 * process memory or environment.
 */
describe.skipIf(!isRoot)('agent with LEOFLOW_RUN_AS_UID/GID (root only)', () => {
  let base: string;
  let fake: FakeAgentService | undefined;

  beforeAll(() => {
    assertAgentBuilt();
    base = mkdtempSync(path.join(os.tmpdir(), 'leoflow-agent-runas-'));
    chmodSync(base, 0o755); // traversable, as a real per-attempt parent directory would be
  });
  afterAll(async () => {
    await fake?.close();
    rmSync(base, { recursive: true, force: true });
  });

  it('isolates the task from root-owned data and from the agent process', async () => {
    const dataDir = path.join(base, 'data');
    mkdirSync(dataDir, { mode: 0o700 });
    const secretFile = path.join(dataDir, 'leoflow.db');
    writeFileSync(secretFile, 'control-plane-secret', { mode: 0o600 });
    const looseSecret = path.join(base, 'master.key');
    writeFileSync(looseSecret, 'master-key-material', { mode: 0o600 });
    const workdir = path.join(base, 'attempt');
    mkdirSync(workdir, { mode: 0o700 }); // as the executor creates it: root-owned

    fake = await FakeAgentService.start({
      spec: defaultSpec({
        command: [
          'echo "ids=$(id -u):$(id -g) groups=$(id -G)"',
          'echo "ppid=$PPID"',
          `cat ${looseSecret} >/dev/null 2>&1 && echo KEY_READ || echo KEY_DENIED`,
          `cat ${secretFile} >/dev/null 2>&1 && echo DB_READ || echo DB_DENIED`,
          `ls ${dataDir} >/dev/null 2>&1 && echo DATADIR_LISTED || echo DATADIR_DENIED`,
          'cat /proc/$PPID/environ >/dev/null 2>&1 && echo ENVIRON_READ || echo ENVIRON_DENIED',
          '(exec 9</proc/$PPID/mem) 2>/dev/null && echo MEM_OPENED || echo MEM_DENIED',
          'cat "$LEOFLOW_XCOM_DIR/up" && echo',
          'echo written > "$HOME/out.txt" && echo HOME_WRITABLE',
        ].join('\n'),
        dependsOn: ['up'],
      }),
      xcoms: { up: 'upstream-value' },
      variables: { greeting: 'hi' },
    });
    const agent = spawnAgent({
      url: fake.url,
      token: 'runas-token',
      workdir,
      // The uid boundary alone (no namespaces): the task must see the agent as its parent for
      // the /proc probes below to aim at it. In the namespaced sandbox the agent is not even in
      // the task's PID namespace (test/security/sandbox-matrix.test.ts).
      env: {
        LEOFLOW_RUN_AS_UID: String(NOBODY),
        LEOFLOW_RUN_AS_GID: String(NOBODY),
        LEOFLOW_SANDBOX_ISOLATION: 'fallback',
      },
    });
    const { code } = await agent.exited;
    expect(code, agent.diagnostics()).toBe(0);
    const out = fake.lines(LogStream.STDOUT);
    expect(out).toContain(`ids=${NOBODY}:${NOBODY} groups=${NOBODY}`);
    expect(out).toContain(`ppid=${agent.pid}`);
    expect(out).toContain('KEY_DENIED');
    expect(out).toContain('DB_DENIED');
    expect(out).toContain('DATADIR_DENIED');
    expect(out).toContain('ENVIRON_DENIED');
    expect(out).toContain('MEM_DENIED');
    expect(out).toContain('upstream-value');
    expect(out).toContain('HOME_WRITABLE');
    expect(statSync(workdir).uid).toBe(NOBODY);
    expect(statSync(path.join(workdir, 'xcom', 'up')).uid).toBe(NOBODY);
    expect(fake.reports[0]!.state).toBe(ReportedState.SUCCESS);
    expect(
      fake.lines(LogStream.AGENT).some((l) => l.includes(`as uid ${NOBODY} gid ${NOBODY}`)),
    ).toBe(true);
  });

  it('runs a node script file as the run-as user', async () => {
    const f = await FakeAgentService.start({
      spec: defaultSpec({
        type: TaskType.NODE,
        command:
          'console.log(`uid=${process.getuid()} home=${process.env.HOME === process.cwd()}`);\n',
        doXcomPush: true,
      }),
    });
    const workdir = mkdtempSync(path.join(base, 'node-'));
    const agent = spawnAgent({
      url: f.url,
      token: 't',
      workdir,
      env: { LEOFLOW_RUN_AS_UID: String(NOBODY), LEOFLOW_RUN_AS_GID: String(NOBODY) },
    });
    const { code } = await agent.exited;
    await f.close();
    expect(code, agent.diagnostics()).toBe(0);
    expect(f.lines(LogStream.STDOUT)).toEqual([`uid=${NOBODY} home=true`]);
    const st = statSync(path.join(workdir, 'task.mjs'));
    expect(st.uid).toBe(NOBODY);
    expect(st.mode & 0o777).toBe(0o600);
  });

  it('refuses to start with only half a run-as pair', async () => {
    const f = await FakeAgentService.start({ spec: defaultSpec() });
    const workdir = mkdtempSync(path.join(base, 'half-'));
    const agent = spawnAgent({
      url: f.url,
      token: 't',
      workdir,
      env: { LEOFLOW_RUN_AS_UID: String(NOBODY) },
    });
    const { code } = await agent.exited;
    await f.close();
    expect(code).toBe(2);
    expect(agent.diagnostics()).toContain(
      'LEOFLOW_RUN_AS_UID and LEOFLOW_RUN_AS_GID must be set together',
    );
    expect(f.calls).toHaveLength(0);
  });
});
