/**
 * Issue 37: Lite's host agent (execution.host_agent on, docs/run-loop.md "The host agent"). One
 * long-lived agent runs every local attempt, each in its own sandbox, uid, token and RPC session.
 * Real standalone, real host agent, real tasks:
 *
 * - a task cannot read the host agent's /proc/<pid>/environ, /proc/<pid>/mem or cmdline, its
 *   diagnostics file, its socket or the data dir; two concurrent attempts get two uids;
 * - kill -9 of the host agent while a task runs: the supervisor starts it again, the new agent
 *   kills what the dead one's uids still ran before it connects, and only then is the attempt
 *   ended (LF_HOST_AGENT_LOST) and retried: the first try's task never finishes, the second
 *   starts after the kill, and the run succeeds on try 2 with try 1 failed in its history;
 * - kill -9 of standalone while a task runs: the host agent (detached) survives, the restarted
 *   control plane adopts it from its pid file, the agent reconnects, and the attempt reports:
 *   the run succeeds on try 1 and the task ran once.
 */
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  api,
  cli,
  scratchDir,
  startStandalone,
  waitFor,
  writeDag,
  isProcessAlive,
  type Standalone,
} from '../support/processes.js';

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
const HOST = { LEOFLOW_EXECUTION_HOST_AGENT: 'on' };

interface RunDetail {
  run: { run_id: string; state: string };
  task_instances: { task_id: string; state: string; try_number: number }[];
}
interface TaskDetail {
  task_instance: { try_number: number; state: string };
  history: { try_number: number; state: string; error_message: string | null }[];
}
interface Logs {
  lines: { message: string }[];
}

function freePort(): Promise<number> {
  return new Promise((res) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => res(port));
    });
  });
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

function hostAgentPid(dataDir: string): number {
  return Number(readFileSync(join(dataDir, 'host-agent.pid'), 'utf8').trim());
}

async function finished(sa: Standalone, dag: string, runId: string, ms = 90_000) {
  return waitFor(
    `run ${runId} to finish`,
    async () => {
      const d = await api<RunDetail>(sa, 'GET', `/api/v1/dags/${dag}/runs/${runId}`);
      return d.run.state === 'success' || d.run.state === 'failed' ? d : undefined;
    },
    ms,
  );
}

async function setUp(
  name: string,
  dags: Record<string, string>,
  agentPort?: number,
  extraArgs: string[] = [],
) {
  const scratch = scratchDir(`leoflow-host-${name}-`);
  cleanups.push(() => scratch.cleanup());
  const marks = join(scratch.dir, 'marks.log');
  writeFileSync(marks, '');
  chmodSync(marks, 0o666);
  const dagsDir = join(scratch.dir, 'dags');
  mkdirSync(dagsDir, { recursive: true });
  for (const [id, yaml] of Object.entries(dags))
    writeDag(dagsDir, id, yaml.replaceAll('__MARKS__', marks));
  const dataDir = join(scratch.dir, 'data');
  const sa = await startStandalone({
    dataDir,
    dagsFolder: dagsDir,
    env: HOST,
    extraArgs,
    ...(agentPort !== undefined ? { agentPort } : {}),
  });
  const box = { sa };
  cleanups.push(() => box.sa.stop());
  // The host agent is killed along with its tasks when the test ends, whatever happened.
  cleanups.push(() => {
    try {
      process.kill(hostAgentPid(dataDir), 'SIGKILL');
    } catch {
      // gone
    }
  });
  await waitFor('the host agent to start', async () => {
    try {
      return isProcessAlive(hostAgentPid(dataDir)) ? true : undefined;
    } catch {
      return undefined;
    }
  });
  return { scratch, marks, dagsDir, dataDir, box };
}

describe('the host agent', () => {
  it('keeps the agent out of every task’s reach, and each attempt under its own uid', async () => {
    const peek = (id: string) => `  - task_id: ${id}
    env: { SCRATCH: "__SCRATCH__", DATA_DIR: "__DATA__" }
    command: |
      sleep 1
      P=$(cat "$SCRATCH/agent.pid")
      try() { if cat "$1" > /dev/null 2>&1; then echo "READABLE $2"; else echo "denied: $2"; fi; }
      try /proc/$P/environ environ
      try /proc/$P/mem mem
      try /proc/$P/cmdline cmdline
      try "$DATA_DIR/agents/host-agent.log" log
      try "$DATA_DIR/host-agent.pid" pidfile
      # masked: an empty read-only tmpfs where the data dir is (root, not masked: 0700)
      if ls -A "$DATA_DIR" 2>/dev/null | grep -q .; then echo "READABLE datadir"; else echo "denied: datadir"; fi
      if python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])" "$DATA_DIR/host-agent.sock" 2>/dev/null; then echo "READABLE socket"; else echo "denied: socket"; fi
      echo "uid $(id -u)"
`;
    const probe = `dag_id: peek\ntasks:\n${peek('p1')}${peek('p2')}`;
    const { scratch, dataDir, box } = await setUp('peek', {});
    const sa = box.sa;
    // The pid is known only now: the DAG is pushed after the start.
    writeFileSync(join(scratch.dir, 'agent.pid'), `${hostAgentPid(dataDir)}\n`);
    chmodSync(join(scratch.dir, 'agent.pid'), 0o644);
    const dir = writeDag(
      join(scratch.dir, 'dags2'),
      'peek',
      probe.replaceAll('__SCRATCH__', scratch.dir).replaceAll('__DATA__', dataDir),
    );
    const pushed = await cli(['dags', 'push', dir], {
      LEOFLOW_URL: sa.url,
      LEOFLOW_TOKEN: sa.token,
    });
    expect(pushed.code, pushed.stderr).toBe(0);
    const { run_id } = await api<{ run_id: string }>(sa, 'POST', '/api/v1/dags/peek/runs', {
      run_id: 'peek_1',
    });
    const detail = await finished(sa, 'peek', run_id);
    expect(detail.run.state).toBe('success');
    const out: Record<string, string[]> = {};
    for (const t of ['p1', 'p2']) {
      const logs = await api<Logs>(sa, 'GET', `/api/v1/dags/peek/runs/${run_id}/tasks/${t}/logs`);
      out[t] = logs.lines.map((l) => l.message);
    }
    const all = [...out.p1!, ...out.p2!];
    if (!isRoot) {
      process.stderr.write(
        'host-agent: not root, so tasks run as this user and the agent is not out of their reach (documented; doctor says so)\n',
      );
      return;
    }
    expect(
      all.filter((l) => l.startsWith('READABLE')),
      all.join('\n'),
    ).toEqual([]);
    for (const what of ['environ', 'mem', 'cmdline', 'log', 'pidfile', 'datadir', 'socket'])
      expect(out.p1, what).toContain(`denied: ${what}`);
    const uids = ['p1', 'p2'].map((t) =>
      Number(out[t]!.find((l) => l.startsWith('uid '))?.slice(4)),
    );
    expect(uids[0]).not.toBe(uids[1]);
    for (const uid of uids) {
      expect(uid).toBeGreaterThanOrEqual(1879048192);
      expect(uid).toBeLessThanOrEqual(1879113727);
    }
  }, 120_000);

  it('kill -9 of the host agent: the attempt ends as lost and is retried, never overlapping', async () => {
    const { marks, dataDir, box } = await setUp('lost', {
      lost: `dag_id: lost
tasks:
  - task_id: t
    retries: 1
    retry_delay_seconds: 1
    env: { MARKS: "__MARKS__" }
    command: |
      echo "$AIRFLOW_CTX_TRY_NUMBER start $(date +%s%3N)" >> "$MARKS"
      if [ "$AIRFLOW_CTX_TRY_NUMBER" = 1 ]; then sleep 6; fi
      echo "$AIRFLOW_CTX_TRY_NUMBER end $(date +%s%3N)" >> "$MARKS"
`,
    });
    const sa = box.sa;
    const first = hostAgentPid(dataDir);
    const { run_id } = await api<{ run_id: string }>(sa, 'POST', '/api/v1/dags/lost/runs', {
      run_id: 'lost_1',
    });
    await waitFor('try 1 to start', async () =>
      readFileSync(marks, 'utf8').includes('1 start') ? true : undefined,
    );
    const killedAt = Date.now();
    process.kill(first, 'SIGKILL');
    const detail = await finished(sa, 'lost', run_id);
    const second = hostAgentPid(dataDir);
    expect(second).not.toBe(first);
    expect(detail.run.state).toBe('success');
    expect(detail.task_instances.map((t) => `${t.state}#${t.try_number}`)).toEqual(['success#2']);
    const task = await api<TaskDetail>(sa, 'GET', `/api/v1/dags/lost/runs/${run_id}/tasks/t`);
    expect(task.history.map((h) => `${h.try_number}:${h.state}`)).toEqual(['1:failed']);
    expect(task.history[0]!.error_message).toContain('LF_HOST_AGENT_LOST');
    // Past the end try 1 would have reached had it lived: it never did (it was killed), and
    // try 2 started only after the kill.
    const startedAt = Number(/^1 start (\d+)$/m.exec(readFileSync(marks, 'utf8'))![1]);
    await new Promise((r) => setTimeout(r, Math.max(0, startedAt + 7_000 - Date.now())));
    const lines = readFileSync(marks, 'utf8').trim().split('\n');
    expect(lines.map((l) => l.split(' ').slice(0, 2).join(' '))).toEqual([
      '1 start',
      '2 start',
      '2 end',
    ]);
    expect(Number(lines[1]!.split(' ')[2])).toBeGreaterThanOrEqual(killedAt);
    expect(sa.output()).toContain('LF_HOST_AGENT_LOST');
  }, 120_000);

  it('kill -9 of standalone: the host agent survives, is adopted, and its attempt reports', async () => {
    const agentPort = await freePort();
    const { marks, dataDir, dagsDir, box } = await setUp(
      'restart',
      {
        slow: `dag_id: slow
tasks:
  - task_id: t
    retries: 2
    env: { MARKS: "__MARKS__" }
    command: |
      echo "$AIRFLOW_CTX_TRY_NUMBER start $(date +%s%3N)" >> "$MARKS"
      sleep 4
      echo "$AIRFLOW_CTX_TRY_NUMBER end $(date +%s%3N)" >> "$MARKS"
      echo finished
`,
      },
      agentPort,
    );
    const agent = hostAgentPid(dataDir);
    const { run_id } = await api<{ run_id: string }>(box.sa, 'POST', '/api/v1/dags/slow/runs', {
      run_id: 'slow_1',
    });
    await waitFor('the task to start', async () =>
      readFileSync(marks, 'utf8').includes('1 start') ? true : undefined,
    );
    box.sa.proc.kill('SIGKILL');
    await waitFor('standalone to die', async () =>
      box.sa.proc.signalCode !== null ? true : undefined,
    );
    expect(isProcessAlive(agent)).toBe(true);
    box.sa = await startStandalone({ dataDir, dagsFolder: dagsDir, agentPort, env: HOST });
    const detail = await finished(box.sa, 'slow', run_id);
    expect(detail.task_instances.map((t) => `${t.state}#${t.try_number}`)).toEqual(['success#1']);
    expect(hostAgentPid(dataDir)).toBe(agent);
    expect(box.sa.output()).toContain('host agent adopted');
    const lines = readFileSync(marks, 'utf8').trim().split('\n');
    expect(lines.map((l) => l.split(' ').slice(0, 2).join(' '))).toEqual(['1 start', '1 end']);
    const logs = await api<Logs>(box.sa, 'GET', `/api/v1/dags/slow/runs/${run_id}/tasks/t/logs`);
    expect(logs.lines.map((l) => l.message)).toContain('finished');
  }, 120_000);

  // The successor of standby-handoff.test.ts's guarantees: each attempt of a chain gets exactly
  // its declared secret, and the value shows up in no process listing, no agent diagnostics
  // and no server output (the tokens and values travel in the host agent's memory only).
  it('a chain runs on the host agent, each task with exactly its declared secret, no canary anywhere else', async () => {
    const canary = `CANARYhost${randomBytes(6).toString('hex')}`;
    const undeclared = `CANARYundeclared${randomBytes(6).toString('hex')}`;
    const { scratch, dataDir, box } = await setUp('secrets', {}, undefined, [
      '--secret-scoping',
      'enforce',
    ]);
    const sa = box.sa;
    const env = { LEOFLOW_URL: sa.url, LEOFLOW_TOKEN: sa.token };
    const seen: string[] = [];
    const leoflow = async (args: string[]) => {
      const res = await cli(args, env);
      seen.push(res.stdout, res.stderr);
      return res;
    };
    expect((await leoflow(['variables', 'set', 'host_secret', canary, '--secret'])).code).toBe(0);
    expect((await leoflow(['variables', 'set', 'not_declared', undeclared, '--secret'])).code).toBe(
      0,
    );
    const step = (id: string, after?: string) =>
      `  - task_id: ${id}\n    type: bash\n    command: 'env | grep -o "^AIRFLOW_VAR_[A-Z_]*" | sort | tr "\\n" " "; echo; printf %s "$AIRFLOW_VAR_HOST_SECRET" | sha256sum'\n` +
      (after ? `    depends_on: [${after}]\n` : '');
    const dir = writeDag(
      join(scratch.dir, 'dags2'),
      'host_chain',
      `dag_id: host_chain\nschedule: null\nvariables: [host_secret]\ntasks:\n${step('a')}${step('b', 'a')}${step('c', 'b')}`,
    );
    expect((await leoflow(['dags', 'push', dir])).code).toBe(0);
    const res = await leoflow(['runs', 'trigger', 'host_chain', '--wait', '-o', 'json']);
    expect(res.code, res.stderr).toBe(0);
    const runId = (JSON.parse(res.stdout) as { run: { run_id: string } }).run.run_id;
    const hash = createHash('sha256').update(canary).digest('hex');
    for (const task of ['a', 'b', 'c']) {
      const logs = await leoflow(['tasks', 'logs', runId, task, '-o', 'json']);
      const lines = (JSON.parse(logs.stdout) as Logs).lines.map((l) => l.message.trim());
      expect(lines, task).toContain('AIRFLOW_VAR_HOST_SECRET');
      expect(lines.join('\n'), task).not.toContain('AIRFLOW_VAR_NOT_DECLARED');
      expect(lines, task).toContain(`${hash}  -`);
    }
    seen.push(execFileSync('ps', ['-eo', 'pid,args', '-ww']).toString());
    const agents = join(dataDir, 'agents');
    for (const f of readdirSync(agents)) seen.push(readFileSync(join(agents, f), 'utf8'));
    seen.push(sa.output());
    const everything = seen.join('\n');
    expect(everything).toContain('host agent started');
    expect(everything).not.toContain(canary);
    expect(everything).not.toContain(undeclared);
  }, 120_000);
});
