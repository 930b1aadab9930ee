import { mkdtempSync, readFileSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Code } from '@connectrpc/connect';
import { LogStream, ReportedState, TaskType } from '@leoflow/protocol';
import { defaultSpec, FakeAgentService, fail, type Script } from './support/fake-agent-service.js';
import { assertAgentBuilt, pidGone, spawnAgent, waitFor, type SpawnAgentOptions } from './support/spawn-agent.js';

const TOKEN = 'tok-1.eyJhbGciOi.sig';
const cleanups: Array<() => Promise<void> | void> = [];

afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

beforeAll(() => assertAgentBuilt());

function tempDir(prefix = 'leoflow-agent-test-'): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function runAgent(
  script: Script,
  opts: Partial<SpawnAgentOptions> = {},
): Promise<{ fake: FakeAgentService; code: number | null; signal: NodeJS.Signals | null; diag: string; workdir: string; pid: number }> {
  const fake = await FakeAgentService.start(script);
  cleanups.push(() => fake.close());
  const workdir = opts.workdir ?? tempDir();
  const agent = spawnAgent({ url: fake.url, token: TOKEN, workdir, ...opts });
  cleanups.push(() => {
    if (agent.child.exitCode === null && agent.child.signalCode === null) agent.child.kill('SIGKILL');
  });
  const { code, signal } = await agent.exited;
  return { fake, code, signal, diag: agent.diagnostics(), workdir, pid: agent.pid };
}

describe('agent process', () => {
  it('runs a bash task: ships logs in order, pushes the last stdout line, reports SUCCESS', async () => {
    const { fake, code, diag } = await runAgent({
      spec: defaultSpec({ command: 'echo one; echo two >&2; sleep 0.1; printf "three\\r\\nfour"; echo; echo "   "', doXcomPush: true }),
    });
    expect(code, diag).toBe(0);
    const numbers = fake.logLines.map((l) => Number(l.lineNumber));
    expect(numbers).toEqual([...numbers].sort((a, b) => a - b));
    expect(numbers[0]).toBe(1);
    expect(new Set(numbers).size).toBe(numbers.length);
    expect(numbers).toEqual(numbers.map((_, i) => i + 1));
    expect(fake.lines(LogStream.STDOUT)).toEqual(['one', 'three', 'four', '   ']);
    expect(fake.lines(LogStream.STDERR)).toEqual(['two']);
    expect(fake.xcomPushes).toHaveLength(1);
    expect(fake.xcomPushes[0]!.key).toBe('return_value');
    expect(fake.xcomPushes[0]!.contentType).toBe('text/plain');
    expect(new TextDecoder().decode(fake.xcomPushes[0]!.value)).toBe('four');
    expect(fake.reports).toHaveLength(1);
    expect(fake.reports[0]!.state).toBe(ReportedState.SUCCESS);
    expect(fake.reports[0]!.exitCode).toBe(0);
    // Every call carried the bearer from fd 3; the order is the documented flow.
    expect(fake.calls.every((c) => c.authorization === `Bearer ${TOKEN}`)).toBe(true);
    expect(fake.calls[0]!.method).toBe('Register');
    expect(fake.calls[1]!.method).toBe('GetTaskSpec');
    expect(fake.calls[fake.calls.length - 1]!.method).toBe('ReportState');
    expect(fake.registers[0]!.pid).toBeGreaterThan(0);
    expect(fake.registers[0]!.agentVersion).toMatch(/^\d+\.\d+\.\d+/);
    expect(diag).not.toContain(TOKEN);
  });

  it('reports FAILED with the exit code and pushes no XCom when the task fails', async () => {
    const { fake, code } = await runAgent({
      spec: defaultSpec({ command: 'echo partial; exit 3', doXcomPush: true }),
    });
    expect(code).toBe(0);
    expect(fake.xcomPushes).toHaveLength(0);
    expect(fake.reports).toHaveLength(1);
    expect(fake.reports[0]!.state).toBe(ReportedState.FAILED);
    expect(fake.reports[0]!.exitCode).toBe(3);
    expect(fake.reports[0]!.errorMessage).toBe('task exited with code 3');
    expect(fake.reports[0]!.timedOut).toBe(false);
  });

  it('runs a python task from <workdir>/task.py', async () => {
    const { fake, code, workdir } = await runAgent({
      spec: defaultSpec({
        type: TaskType.PYTHON,
        command: 'import os, sys\nprint("cwd=" + os.getcwd())\nprint("py-err", file=sys.stderr)\nprint("py-result")\n',
        doXcomPush: true,
      }),
    });
    expect(code).toBe(0);
    expect(fake.lines(LogStream.STDOUT)).toEqual([`cwd=${workdir}`, 'py-result']);
    expect(fake.lines(LogStream.STDERR)).toEqual(['py-err']);
    expect(new TextDecoder().decode(fake.xcomPushes[0]!.value)).toBe('py-result');
    expect(fake.reports[0]!.state).toBe(ReportedState.SUCCESS);
    expect(readFileSync(path.join(workdir, 'task.py'), 'utf8')).toContain('py-result');
  });

  it('runs a node task from <workdir>/task.mjs and fails it on a thrown error', async () => {
    const ok = await runAgent({
      spec: defaultSpec({ type: TaskType.NODE, command: 'console.log(JSON.stringify({ n: 41 + 1 }));\n', doXcomPush: true }),
    });
    expect(ok.code).toBe(0);
    expect(new TextDecoder().decode(ok.fake.xcomPushes[0]!.value)).toBe('{"n":42}');
    expect(ok.fake.reports[0]!.state).toBe(ReportedState.SUCCESS);

    const bad = await runAgent({ spec: defaultSpec({ type: TaskType.NODE, command: 'throw new Error("boom");\n' }) });
    expect(bad.fake.reports[0]!.state).toBe(ReportedState.FAILED);
    expect(bad.fake.reports[0]!.exitCode).toBe(1);
    expect(bad.fake.lines(LogStream.STDERR).join('\n')).toContain('boom');
  });

  it('execution timeout kills the whole process group and reports timed_out', async () => {
    const started = Date.now();
    const { fake, code, workdir } = await runAgent({
      spec: defaultSpec({
        command: 'sleep 300 & echo $! > grandchild.pid; echo waiting; wait',
        executionTimeoutSeconds: 1,
        doXcomPush: true,
      }),
    });
    expect(code).toBe(0);
    expect(Date.now() - started).toBeLessThan(10_000);
    const grandchild = Number(readFileSync(path.join(workdir, 'grandchild.pid'), 'utf8'));
    expect(grandchild).toBeGreaterThan(0);
    expect(pidGone(grandchild)).toBe(true);
    expect(fake.reports).toHaveLength(1);
    const r = fake.reports[0]!;
    expect(r.state).toBe(ReportedState.FAILED);
    expect(r.timedOut).toBe(true);
    expect(r.errorMessage).toBe('execution timeout after 1s');
    expect(r.exitCode).toBe(128 + 15);
    expect(fake.xcomPushes).toHaveLength(0);
    expect(fake.lines(LogStream.AGENT).some((l) => l.includes('execution timeout after 1s'))).toBe(true);
  });

  it('should_terminate from a heartbeat kills the group and exits without reporting', async () => {
    const { fake, code, workdir } = await runAgent(
      {
        spec: defaultSpec({ command: 'sleep 300 & echo $! > grandchild.pid; wait' }),
        heartbeat: (n) => (n >= 2 ? { shouldTerminate: true, terminateReason: 'try superseded' } : {}),
      },
      { env: { LEOFLOW_HEARTBEAT_INTERVAL_MS: '200' } },
    );
    expect(code).toBe(4);
    expect(fake.reports).toHaveLength(0);
    expect(fake.count('Heartbeat')).toBeGreaterThanOrEqual(2);
    const grandchild = Number(readFileSync(path.join(workdir, 'grandchild.pid'), 'utf8'));
    expect(pidGone(grandchild)).toBe(true);
    expect(fake.lines(LogStream.AGENT).some((l) => l.includes('try superseded'))).toBe(true);
  });

  it('swaps in a renewed token for every later call', async () => {
    const { fake, code } = await runAgent(
      {
        spec: defaultSpec({ command: 'sleep 0.8; echo done' }),
        heartbeat: (n) => (n === 1 ? { renewedToken: 'tok-2.renewed.sig' } : n === 2 ? { renewedToken: '' } : {}),
      },
      { env: { LEOFLOW_HEARTBEAT_INTERVAL_MS: '200' } },
    );
    expect(code).toBe(0);
    const firstHb = fake.calls.findIndex((c) => c.method === 'Heartbeat');
    expect(fake.calls[firstHb]!.authorization).toBe(`Bearer ${TOKEN}`);
    const before = fake.calls.slice(0, firstHb + 1);
    expect(before.every((c) => c.authorization === `Bearer ${TOKEN}`)).toBe(true);
    expect(fake.callsOf('Heartbeat')[1]!.authorization).toBe('Bearer tok-2.renewed.sig');
    // An empty renewal is a no-op: the final report still uses the renewed token.
    expect(fake.callsOf('ReportState')[0]!.authorization).toBe('Bearer tok-2.renewed.sig');
    expect(fake.callsOf('Heartbeat').length).toBeGreaterThanOrEqual(3);
  });

  it('exports secrets and runtime context, strips agent-only LEOFLOW_* and author LEOFLOW_* env', async () => {
    const big = 'x'.repeat(64 * 1024 + 1);
    const { fake, code, workdir } = await runAgent(
      {
        spec: defaultSpec({
          command: 'env -0 | tr "\\0" "\\n" | grep -v "^$" | LC_ALL=C sort',
          env: { AUTHOR_VAR: 'from-author', LEOFLOW_EVIL: 'author-set', leoflow_lower: 'author-set', HOME: '/nope' },
          logicalDate: '2026-01-01T00:00:00Z',
          dataIntervalStart: '2026-01-01T00:00:00Z',
          dataIntervalEnd: '2026-01-02T00:00:00Z',
          paramsJson: '{"p":1}',
          confJson: '{"c":true}',
          tryNumber: 2,
          dependsOn: ['extract-step', 'big.one', 'binary', 'missing'],
        }),
        variables: { greeting: 'hi', 'Mixed.Key': 'v2' },
        connections: { warehouse: 'postgres://u:p%40ss@db.example:5432/wh' },
        xcoms: { 'extract-step': '{"rows": 3}', 'big.one': big, binary: new Uint8Array([0xff, 0xfe, 0x00]) },
      },
      {
        env: {
          LEOFLOW_STAGING_DIR: '/staging',
          LEOFLOW_SOME_OPERATOR_SECRET: 'agent-only',
          leoflow_lowercase_agent: 'agent-only',
          LEOFLOW_PYTHON: 'python3',
          TZ: 'UTC',
        },
      },
    );
    expect(code).toBe(0);
    const env = new Map<string, string>();
    for (const line of fake.lines(LogStream.STDOUT)) {
      const i = line.indexOf('=');
      env.set(line.slice(0, i), line.slice(i + 1));
    }
    expect(env.get('AIRFLOW_VAR_GREETING')).toBe('hi');
    expect(env.get('AIRFLOW_VAR_MIXED.KEY')).toBe('v2');
    expect(env.get('AIRFLOW_CONN_WAREHOUSE')).toBe('postgres://u:p%40ss@db.example:5432/wh');
    expect(env.get('AIRFLOW_CTX_DAG_ID')).toBe('demo');
    expect(env.get('AIRFLOW_CTX_DAG_RUN_ID')).toBe('manual__2026-01-01T00:00:00Z');
    expect(env.get('AIRFLOW_CTX_TASK_ID')).toBe('t1');
    expect(env.get('AIRFLOW_CTX_TRY_NUMBER')).toBe('2');
    expect(env.get('AIRFLOW_CTX_LOGICAL_DATE')).toBe('2026-01-01T00:00:00Z');
    expect(env.get('LEOFLOW_RUN_ID')).toBe('manual__2026-01-01T00:00:00Z');
    expect(env.get('LEOFLOW_PARAMS')).toBe('{"p":1}');
    expect(env.get('LEOFLOW_RUN_CONF')).toBe('{"c":true}');
    expect(env.get('LEOFLOW_DATA_INTERVAL_START')).toBe('2026-01-01T00:00:00Z');
    expect(env.get('LEOFLOW_DATA_INTERVAL_END')).toBe('2026-01-02T00:00:00Z');
    expect(env.get('LEOFLOW_XCOM_DIR')).toBe(path.join(workdir, 'xcom'));
    expect(env.get('LEOFLOW_XCOM_EXTRACT_STEP')).toBe('{"rows": 3}');
    expect(env.has('LEOFLOW_XCOM_BIG_ONE')).toBe(false); // over 64 KiB: file only
    expect(env.has('LEOFLOW_XCOM_BINARY')).toBe(false); // not UTF-8: file only
    expect(env.has('LEOFLOW_XCOM_MISSING')).toBe(false);
    expect(readFileSync(path.join(workdir, 'xcom', 'extract-step'), 'utf8')).toBe('{"rows": 3}');
    expect(readFileSync(path.join(workdir, 'xcom', 'big.one'), 'utf8')).toBe(big);
    expect([...readFileSync(path.join(workdir, 'xcom', 'binary'))]).toEqual([0xff, 0xfe, 0x00]);
    expect(env.get('HOME')).toBe(workdir);
    expect(env.get('AUTHOR_VAR')).toBe('from-author');
    expect(env.get('TZ')).toBe('UTC');
    expect(env.get('LEOFLOW_STAGING_DIR')).toBe('/staging');
    expect(env.get('LEOFLOW_TASK_INSTANCE_ID')).toBe('ti-1');
    for (const gone of [
      'LEOFLOW_AGENT_URL',
      'LEOFLOW_WORKDIR',
      'LEOFLOW_HEARTBEAT_INTERVAL_MS',
      'LEOFLOW_SOME_OPERATOR_SECRET',
      'leoflow_lowercase_agent',
      'LEOFLOW_PYTHON',
      'LEOFLOW_EVIL',
      'leoflow_lower',
    ]) {
      expect(env.has(gone), gone).toBe(false);
    }
    const leoflowNames = [...env.keys()].filter((k) => k.toUpperCase().startsWith('LEOFLOW_')).sort();
    expect(leoflowNames).toEqual(
      [
        'LEOFLOW_DATA_INTERVAL_END',
        'LEOFLOW_DATA_INTERVAL_START',
        'LEOFLOW_PARAMS',
        'LEOFLOW_RUN_CONF',
        'LEOFLOW_RUN_ID',
        'LEOFLOW_STAGING_DIR',
        'LEOFLOW_TASK_INSTANCE_ID',
        'LEOFLOW_XCOM_DIR',
        'LEOFLOW_XCOM_EXTRACT_STEP',
      ].sort(),
    );
    expect(fake.callsOf('FetchXCom')).toHaveLength(4);
  });

  it('runs the task without secrets when GetConnections/GetVariables are refused', async () => {
    const { fake, code, diag } = await runAgent({
      spec: defaultSpec({ command: 'echo "conn=${AIRFLOW_CONN_WAREHOUSE:-unset} var=${AIRFLOW_VAR_GREETING:-unset}"' }),
      variables: Code.Unimplemented,
      connections: Code.PermissionDenied,
    });
    expect(code).toBe(0);
    expect(fake.lines(LogStream.STDOUT)).toEqual(['conn=unset var=unset']);
    const agentLines = fake.lines(LogStream.AGENT);
    expect(agentLines).toContain('secret fetch refused: PermissionDenied (connections)');
    expect(agentLines).toContain('secret fetch refused: Unimplemented (variables)');
    expect(diag).toContain('secret fetch refused: PermissionDenied');
    expect(fake.reports[0]!.state).toBe(ReportedState.SUCCESS);
  });

  it('exports the granted half when only one secret fetch is refused', async () => {
    const { fake, code } = await runAgent({
      spec: defaultSpec({ command: 'echo "conn=${AIRFLOW_CONN_WAREHOUSE:-unset} var=${AIRFLOW_VAR_GREETING:-unset}"' }),
      variables: { greeting: 'hi' },
      connections: Code.PermissionDenied,
    });
    expect(code).toBe(0);
    expect(fake.lines(LogStream.STDOUT)).toEqual(['conn=unset var=hi']);
  });

  it('CREDENTIAL CANARY: the token is in no env, /proc entry or readable file the task can reach', async () => {
    // Assembled at runtime so no file (this source, vitest's transform cache) holds the prefix.
    const prefix = ['LF', 'CANARY', 'TOKEN'].join('_');
    const canary = `${prefix}_${Math.random().toString(36).slice(2, 10)}${Date.now().toString(36)}`;
    const fake = await FakeAgentService.start({
      spec: defaultSpec({
        // The pattern cannot match itself ([Y], [N]), so grep finds only a real leak.
        command: [
          'echo "== env"; env',
          'echo "== parent environ"; tr "\\0" "\\n" < /proc/$PPID/environ',
          'echo "== parent cmdline"; tr "\\0" " " < /proc/$PPID/cmdline; echo',
          'echo "== self environ"; tr "\\0" "\\n" < /proc/self/environ',
          'echo "== parent fds"; ls -l /proc/$PPID/fd 2>&1',
          'echo "== ps"; (ps -eo pid,args 2>/dev/null || true)',
          'echo "== grep"',
          'if timeout 60 grep -r -a -o -s -E "LF_CANAR[Y]_TOKE[N]_[a-z0-9]{8,}" "$PWD" /tmp; then echo FOUND; else echo GREP_NONE; fi',
        ].join('\n'),
      }),
      variables: { greeting: 'hi' },
    });
    cleanups.push(() => fake.close());
    const workdir = tempDir();
    const agent = spawnAgent({ url: fake.url, token: canary, workdir });
    const { code } = await agent.exited;
    expect(code, agent.diagnostics()).toBe(0);
    const out = fake.lines().join('\n');
    expect(out).toContain('== parent environ');
    expect(out).toContain('LEOFLOW_AGENT_URL='); // we really read the agent's environ…
    expect(out).toMatch(/== parent cmdline\n\S*node \S*main\.js/); // …and its argv
    expect(out).toContain('GREP_NONE');
    expect(out).not.toContain(prefix);
    expect(out).not.toContain(canary);
    // fd 3 was closed before the task started.
    const fdSection = out.slice(out.indexOf('== parent fds'), out.indexOf('== ps'));
    expect(fdSection).not.toMatch(/ 3 -> pipe:/);
    expect(agent.diagnostics()).not.toContain(canary);
    // The server saw it only as the bearer.
    expect(fake.calls.every((c) => c.authorization === `Bearer ${canary}`)).toBe(true);
  });
});
