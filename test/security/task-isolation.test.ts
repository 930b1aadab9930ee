import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cli,
  scratchDir,
  startStandalone,
  waitFor,
  writeDag,
  type Standalone,
} from '../support/processes.js';

/**
 * Issue 10, item 1: concurrent attempts (of two tenants, and of two DAGs of one tenant) under a
 * real `leoflow standalone` run as root must not reach each other: not the delivered secrets in
 * /proc/<pid>/environ, not the work dir behind /proc/<pid>/cwd, not the open files under
 * /proc/<pid>/fd, and no signal. A child a task detaches with setsid must not outlive its
 * attempt. Before the fix every attempt ran as `nobody` and all of this was possible.
 */
const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
const DEFAULT_RANGE = { first: 1879048192, last: 1879113727 };
const LOCK_DIR = '/run/leoflow/attempt-uids';

let scratch: ReturnType<typeof scratchDir>;
let sa: Standalone;
let bToken = '';
const canaryDefault = `cnry-default-${randomBytes(6).toString('hex')}`;
const canaryB = `cnry-teamb-${randomBytes(6).toString('hex')}`;
const asDefault = () => ({ LEOFLOW_URL: sa.url, LEOFLOW_TOKEN: sa.token });
const asB = () => ({ LEOFLOW_URL: sa.url, LEOFLOW_TOKEN: bToken });

/**
 * Publishes its pid and uid, holds a file open, waits for its peer, probes the peer through
 * /proc and with a signal, then waits until the peer has probed it too (so both are alive
 * throughout). Every outcome is one log line.
 */
function probeDag(dagId: string, pair: string, me: string, peer: string): string {
  return `dag_id: ${dagId}
tasks:
  - task_id: probe
    execution_timeout_seconds: 60
    env: { D: "${scratch.dir}/${pair}", ME: "${me}", PEER: "${peer}" }
    command: |
      echo "held open" > "$HOME/held.txt"
      exec 7<"$HOME/held.txt"
      id -u > "$D/$ME.uid"
      grep '^Groups:' /proc/self/status | tr -d '\\t' | sed 's/^/status /'
      echo $$ > "$D/$ME.pid.tmp" && mv "$D/$ME.pid.tmp" "$D/$ME.pid"
      for i in $(seq 1 300); do [ -s "$D/$PEER.pid" ] && break; sleep 0.1; done
      P=$(cat "$D/$PEER.pid")
      echo "peer pid $P"
      if cat /proc/$P/environ > "$HOME/peer-env" 2>/dev/null; then echo "PEER_ENVIRON_READ $(tr '\\0' '\\n' < "$HOME/peer-env" | grep -a AIRFLOW_VAR_ | tr '\\n' ' ')"; else echo "peer environ: denied"; fi
      if ls /proc/$P/cwd/ >/dev/null 2>&1; then echo "PEER_CWD_LISTED $(ls /proc/$P/cwd/ | tr '\\n' ' ')"; else echo "peer cwd: denied"; fi
      if ls /proc/$P/fd/ >/dev/null 2>&1; then echo "PEER_FDS_LISTED"; else echo "peer fds: denied"; fi
      if cat /proc/$P/fd/7 >/dev/null 2>&1; then echo "PEER_FD_READ"; else echo "peer fd 7: denied"; fi
      if kill -0 $P 2>/dev/null; then echo "PEER_SIGNALLED"; else echo "peer signal: denied"; fi
      touch "$D/$ME.done"
      for i in $(seq 1 300); do [ -e "$D/$PEER.done" ] && break; sleep 0.1; done
      echo "probe finished"
`;
}

beforeAll(async () => {
  scratch = scratchDir('leoflow-sec-iso-');
  for (const pair of ['tenants', 'dags', 'setsid']) {
    mkdirSync(join(scratch.dir, pair));
    chmodSync(join(scratch.dir, pair), 0o777);
  }
  const dags = join(scratch.dir, 'dags-folder');
  writeDag(dags, 'iso_tenant_a', probeDag('iso_tenant_a', 'tenants', 'a', 'b'));
  writeDag(dags, 'iso_dag_one', probeDag('iso_dag_one', 'dags', 'one', 'two'));
  writeDag(dags, 'iso_dag_two', probeDag('iso_dag_two', 'dags', 'two', 'one'));
  writeDag(
    dags,
    'iso_setsid',
    `dag_id: iso_setsid
tasks:
  - task_id: escape
    env: { D: "${scratch.dir}/setsid" }
    command: |
      setsid sleep 300 < /dev/null > /dev/null 2>&1 &
      echo $! > "$D/escaped.pid"
      echo "for whoever gets this uid next" > "/tmp/leoflow-leftover-$$"
      echo "/tmp/leoflow-leftover-$$" > "$D/leftover"
      id -u > "$D/uid"
      echo "left $(cat "$D/escaped.pid") running"
`,
  );
  // The per-uid boundary itself, without namespaces (execution.isolation fallback): the probes
  // address their peer by its pid, which a PID namespace hides altogether. The namespaced
  // sandbox is tested with the same probes and more in sandbox-matrix.test.ts.
  sa = await startStandalone({
    dataDir: join(scratch.dir, 'data'),
    dagsFolder: dags,
    extraArgs: ['--isolation', 'fallback'],
  });

  // Tenant team-b with its own admin token, secret and DAG.
  expect((await cli(['tenants', 'create', 'team-b'], asDefault())).code).toBe(0);
  const tok = await cli(
    ['auth', 'create-token', '--tenant', 'team-b', '--role', 'admin', '--name', 'b'],
    asDefault(),
  );
  expect(tok.code, tok.stderr).toBe(0);
  bToken = tok.stdout.trim();
  const bDags = join(scratch.dir, 'dags-b');
  const bDir = writeDag(bDags, 'iso_tenant_b', probeDag('iso_tenant_b', 'tenants', 'b', 'a'));
  expect(
    (await cli(['variables', 'set', 'canary', canaryDefault, '--secret'], asDefault())).code,
  ).toBe(0);
  expect((await cli(['variables', 'set', 'canary', canaryB, '--secret'], asB())).code).toBe(0);
  const push = await cli(['dags', 'push', bDir], asB());
  expect(push.code, push.stderr).toBe(0);
});

afterAll(async () => {
  await sa?.stop();
  scratch?.cleanup();
});

async function trigger(dag: string, env: Record<string, string>): Promise<string> {
  const r = await cli(['runs', 'trigger', dag, '-o', 'json'], env);
  expect(r.code, r.stderr).toBe(0);
  return (JSON.parse(r.stdout) as { run_id: string }).run_id;
}

async function finished(dag: string, runId: string, env: Record<string, string>): Promise<string> {
  return waitFor(
    `${dag} ${runId} to finish`,
    async () => {
      const r = await cli(['runs', 'show', runId, '--dag', dag, '-o', 'json'], env);
      const state = (JSON.parse(r.stdout) as { run: { state: string } }).run.state;
      return state === 'success' || state === 'failed' ? state : undefined;
    },
    90_000,
  );
}

async function logLines(
  runId: string,
  task: string,
  dag: string,
  env: Record<string, string>,
): Promise<string[]> {
  const logs = await cli(['tasks', 'logs', runId, task, '--dag', dag, '-o', 'json'], env);
  return (JSON.parse(logs.stdout) as { lines: { message: string }[] }).lines.map((l) => l.message);
}

function expectSealedOff(lines: string[], peerSecret: string): void {
  const text = lines.join('\n');
  expect(text).toContain('probe finished');
  expect(
    lines.filter((l) => /^PEER_/.test(l)),
    text,
  ).toEqual([]);
  for (const what of ['environ', 'cwd', 'fds', 'fd 7', 'signal'])
    expect(lines, text).toContain(`peer ${what}: denied`);
  expect(text).not.toContain(peerSecret);
  // no supplementary groups
  expect(
    lines.filter((l) => l.startsWith('status Groups:')).map((l) => l.trim()),
    text,
  ).toEqual(['status Groups:']);
}

function uidOf(pair: string, who: string): number {
  return Number(readFileSync(join(scratch.dir, pair, `${who}.uid`), 'utf8').trim());
}

function pidGone(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
    return state === 'Z' || state === 'X';
  } catch {
    return true;
  }
}

describe.skipIf(!isRoot)('every attempt runs under a uid of its own (root)', () => {
  it('two tenants: concurrent attempts cannot read each other’s environ, cwd or fds, nor signal each other', async () => {
    const runA = await trigger('iso_tenant_a', asDefault());
    const runB = await trigger('iso_tenant_b', asB());
    expect(await finished('iso_tenant_a', runA, asDefault())).toBe('success');
    expect(await finished('iso_tenant_b', runB, asB())).toBe('success');
    expectSealedOff(await logLines(runA, 'probe', 'iso_tenant_a', asDefault()), canaryB);
    expectSealedOff(await logLines(runB, 'probe', 'iso_tenant_b', asB()), canaryDefault);
    const [a, b] = [uidOf('tenants', 'a'), uidOf('tenants', 'b')];
    expect(a).not.toBe(b);
    for (const uid of [a, b]) {
      expect(uid).toBeGreaterThanOrEqual(DEFAULT_RANGE.first);
      expect(uid).toBeLessThanOrEqual(DEFAULT_RANGE.last);
    }
  });

  it('one tenant, two DAGs: the same holds between them, and both uids are released afterwards', async () => {
    const run1 = await trigger('iso_dag_one', asDefault());
    const run2 = await trigger('iso_dag_two', asDefault());
    expect(await finished('iso_dag_one', run1, asDefault())).toBe('success');
    expect(await finished('iso_dag_two', run2, asDefault())).toBe('success');
    expectSealedOff(await logLines(run1, 'probe', 'iso_dag_one', asDefault()), canaryDefault);
    expectSealedOff(await logLines(run2, 'probe', 'iso_dag_two', asDefault()), canaryDefault);
    const [one, two] = [uidOf('dags', 'one'), uidOf('dags', 'two')];
    expect(one).not.toBe(two);
    // Released once every process of the uid is gone: no allocation entry is left behind.
    await waitFor('the uids to be released', async () =>
      existsSync(join(LOCK_DIR, String(one))) || existsSync(join(LOCK_DIR, String(two)))
        ? undefined
        : true,
    );
  });

  it('boot refuses a uid range that overlaps an account, naming the key, before writing anything', async () => {
    const dataDir = join(scratch.dir, 'refused');
    const err = await startStandalone({
      dataDir,
      extraArgs: ['--attempt-uid-range', '65000-66000'],
    }).then(
      async (s) => {
        await s.stop();
        return undefined;
      },
      (e: unknown) => e as Error,
    );
    expect(err?.message).toContain(
      'execution.attempt_uid_range=65000-66000 overlaps nobody (65534)',
    );
    expect(existsSync(join(dataDir, 'admin.token'))).toBe(false);
  });

  it('a child detached with setsid is killed, and a file left in /tmp removed, when its attempt ends', async () => {
    const run = await trigger('iso_setsid', asDefault());
    expect(await finished('iso_setsid', run, asDefault())).toBe('success');
    const pid = Number(readFileSync(join(scratch.dir, 'setsid', 'escaped.pid'), 'utf8').trim());
    expect(pid).toBeGreaterThan(0);
    const lines = await logLines(run, 'escape', 'iso_setsid', asDefault());
    expect(lines.join('\n')).toContain(`left ${pid} running`);
    // The run is success only after the agent reported, which it does after the uid sweep.
    expect(pidGone(pid), `pid ${pid} (setsid sleep 300) outlived its attempt`).toBe(true);
    const uid = Number(readFileSync(join(scratch.dir, 'setsid', 'uid'), 'utf8').trim());
    expect(uid).toBeGreaterThanOrEqual(DEFAULT_RANGE.first);
    // The uid goes back to the range: the next attempt given it must not find this file.
    const leftover = readFileSync(join(scratch.dir, 'setsid', 'leftover'), 'utf8').trim();
    await waitFor('the left-over file to be removed', async () =>
      existsSync(leftover) ? undefined : true,
    );
  });
});
