import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshPostgresDatabase } from '../support/postgres-database.js';
import {
  adminToken,
  allFinished as allFinishedIn,
  executions as executionsIn,
  leaderOf,
  markingTask as markingTaskIn,
  overlapping,
  runStates as runStatesIn,
  startAgentService,
  TERMINAL_RUN_STATES as TERMINAL,
  trigger as triggerVia,
  startReplica,
  vaultKey,
  type Replica,
  type ReplicaSpec,
  type Role,
} from '../support/pro-cluster.js';
import { scratchDir, waitFor, writeDag } from '../support/processes.js';

// Three `leoflow server` processes on one PostgreSQL (two `all`, one `api`) with the subprocess
// executor, as docs/pro.md describes. Agents reach the replicas through one address, as they
// would through a Kubernetes Service, so an agent outlives the replica that started it.

const LEASE: ReplicaSpec['lease'] = ['3s', '500ms', '1s'];

let db: { url: string; drop: () => Promise<void> };
let scratch: { dir: string; cleanup: () => void };
let marks: string;
let service: Awaited<ReturnType<typeof startAgentService>>;
let client: pg.Client;
const replicas = new Map<string, Replica>();
let token: string;
// every_minute is scheduled from the DAGs folder: new DAGs start unpaused here (issue 40's default is paused)
const env = { LEOFLOW_SECRET_KEY: vaultKey(), LEOFLOW_DAGS_PAUSED_AT_CREATION: 'false' };

function spec(name: string, role: Role): ReplicaSpec {
  return {
    name,
    role,
    root: join(scratch.dir, 'replicas'),
    writablePaths: [scratch.dir],
    keysDir: join(scratch.dir, 'keys'),
    databaseUrl: db.url,
    agentServiceUrl: service.url,
    dagsFolder: join(scratch.dir, 'dags'),
    env,
    lease: LEASE,
  };
}

async function start(name: string, role: Role, keep?: Replica): Promise<Replica> {
  const r = await startReplica(
    spec(name, role),
    keep ? { http: keep.httpPort, agent: keep.agentPort } : undefined,
  );
  replicas.set(name, r);
  return r;
}

function markingTask(task_id: string, depends: string[] = []): string {
  return markingTaskIn(marks, task_id, depends);
}

const executions = () => executionsIn(marks);
const trigger = (via: Replica[], dag: string, runId: string) => triggerVia(via, token, dag, runId);
const runStates = (dag: string) => runStatesIn(client, dag);
const allFinished = (dag: string, expected: number) => allFinishedIn(client, dag, expected);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  scratch = scratchDir('leoflow-pro-replicas-');
  marks = join(scratch.dir, 'marks');
  const { mkdirSync, chmodSync } = await import('node:fs');
  mkdirSync(marks, { mode: 0o777 });
  chmodSync(marks, 0o777);
  db = await freshPostgresDatabase('pro_replicas');
  client = new pg.Client({ connectionString: db.url });
  await client.connect();
  const dags = join(scratch.dir, 'dags');
  writeDag(
    dags,
    'chain',
    `dag_id: chain\ntasks:\n${markingTask('t1')}${markingTask('t2', ['t1'])}${markingTask('t3', ['t2'])}`,
  );
  writeDag(
    dags,
    'decided_failure',
    `dag_id: decided_failure
tasks:
  - task_id: fails
    command: exit 3
  - task_id: after
    depends_on: [fails]
    command: echo never
`,
  );
  const startDate = new Date(Date.now() - 6 * 60_000);
  startDate.setUTCSeconds(0, 0);
  writeDag(
    dags,
    'every_minute',
    `dag_id: every_minute
schedule: '* * * * *'
start_date: '${startDate.toISOString()}'
catchup: true
tasks:
  - task_id: tick
    command: echo tick
`,
  );
  service = await startAgentService(() =>
    [...replicas.values()].filter((r) => r.proc.exitCode === null).map((r) => r.agentPort),
  );
  // The first replica mints the keyrings and the admin token; the others share them.
  await start('a', 'all');
  token = adminToken(join(scratch.dir, 'keys'));
  await Promise.all([start('b', 'all'), start('c', 'api')]);
}, 180_000);

afterAll(async () => {
  for (const r of replicas.values()) await r.kill9();
  await service?.close();
  await client?.end();
  await db?.drop();
  scratch?.cleanup();
});

describe('Pro replicas on one PostgreSQL', () => {
  it('kill -9 of the leader, repeatedly and at different moments: another takes over, every run ends as its tasks decided, no task instance runs twice at once, no scheduled run is created twice', async () => {
    const api = () => [replicas.get('c')!, replicas.get('a')!, replicas.get('b')!];
    let healthFailures = 0;
    let polling = true;
    const poller = (async () => {
      // The api replica keeps serving through every failover.
      while (polling) {
        try {
          const res = await fetch(`${replicas.get('c')!.url}/api/v1/health`);
          if (!res.ok) healthFailures++;
        } catch {
          healthFailures++;
        }
        await sleep(100);
      }
    })();
    let chains = 0;
    for (let i = 0; i < 4; i++) await trigger(api(), 'chain', `chain-${chains++}`);
    await trigger(api(), 'decided_failure', 'decided');

    const failovers: number[] = [];
    for (const delay of [400, 1500, 2600]) {
      await sleep(delay);
      const leader = await waitFor(
        'a leader',
        () => leaderOf([replicas.get('a')!, replicas.get('b')!]),
        30_000,
      );
      const other = leader === replicas.get('a') ? replicas.get('b')! : replicas.get('a')!;
      await leader.kill9();
      const killedAt = Date.now();
      await waitFor('the takeover', async () => ((await other.leads()) ? true : undefined), 30_000);
      failovers.push(Date.now() - killedAt);
      await trigger(
        api().filter((r) => r.proc.exitCode === null),
        'chain',
        `chain-${chains++}`,
      );
      // The killed replica comes back as a follower on its data dir but new ports, as a
      // replaced pod gets a new address: its agents can only reach it through the agent URL.
      await start(leader.spec.name, 'all');
    }
    polling = false;
    await poller;

    const chainRuns = await waitFor(
      'every chain run to finish',
      () => allFinished('chain', chains),
      150_000,
    );
    expect([...chainRuns.values()].every((s) => s === 'success')).toBe(true);
    expect((await runStates('decided_failure')).get('decided')).toBe('failed');
    const { rows: decided } = await client.query<{ task_id: string; state: string }>(
      `select ti.task_id, ti.state from task_instances ti join dag_runs r on r.id = ti.dag_run_id
        where r.dag_id = 'decided_failure' order by ti.task_id`,
    );
    expect(decided).toEqual([
      { task_id: 'after', state: 'upstream_failed' },
      { task_id: 'fails', state: 'failed' },
    ]);

    // Every chain task ran exactly once, on its first try, and never beside itself.
    const runs = executions();
    expect(overlapping(runs)).toEqual([]);
    const perInstance = new Map<string, number>();
    for (const e of runs)
      perInstance.set(`${e.run}/${e.task}`, (perInstance.get(`${e.run}/${e.task}`) ?? 0) + 1);
    expect(perInstance.size).toBe(chains * 3);
    expect([...perInstance.values()].every((n) => n === 1)).toBe(true);
    const { rows: history } = await client.query<{ n: string }>(
      `select count(*) as n from task_instance_history h join dag_runs r on r.id = h.dag_run_id where r.dag_id = 'chain'`,
    );
    expect(Number(history[0]!.n)).toBe(0);

    // One scheduled run per minute since the start date: no gap, no duplicate.
    const { rows: scheduled } = await client.query<{ logical_date: string }>(
      `select logical_date from dag_runs where dag_id = 'every_minute' and run_type = 'scheduled' order by logical_date`,
    );
    const dates = scheduled.map((r) => Number(r.logical_date));
    expect(new Set(dates).size).toBe(dates.length);
    expect(dates.length).toBeGreaterThanOrEqual(6);
    for (let i = 1; i < dates.length; i++) expect(dates[i]! - dates[i - 1]!).toBe(60_000);

    expect(healthFailures).toBe(0);
    // Bounded by ttl + renew interval (3.5 s) plus this test's polling and a loaded machine.
    for (const ms of failovers) expect(ms).toBeLessThan(10_000);
  }, 400_000);

  it('a rolling restart (SIGTERM, drain, start again; one replica at a time) loses nothing', async () => {
    const before = executions().length;
    const ids: string[] = [];
    let n = 0;
    let triggering = true;
    const alive = () =>
      [...replicas.values()].filter((r) => r.proc.exitCode === null && r.spec.role !== 'scheduler');
    const triggers = (async () => {
      while (triggering) {
        const id = `rolling-${n++}`;
        await trigger(alive(), 'chain', id);
        ids.push(id);
        await sleep(700);
      }
    })();
    for (const name of ['a', 'b', 'c']) {
      const r = replicas.get(name)!;
      const code = await r.stop();
      // A drained replica exits 0: it finished within its grace.
      expect(code).toBe(0);
      expect(r.output()).toMatch(/draining/);
      await start(name, r.spec.role, r);
      await sleep(500);
    }
    triggering = false;
    await triggers;
    const states = await waitFor(
      'every rolling run to finish',
      async () => {
        const all = await runStates('chain');
        const mine = ids.map((id) => all.get(id));
        return mine.every((s) => s !== undefined && TERMINAL.includes(s)) ? mine : undefined;
      },
      150_000,
    );
    const unsuccessful = ids.filter((_, i) => states[i] !== 'success');
    // A failure names each run that did not succeed and why its tasks ended as they did.
    const why = unsuccessful.length
      ? (
          await client.query(
            `select r.run_id, ti.task_id, ti.state, ti.try_number, ti.exit_code, ti.error_message
               from task_instances ti join dag_runs r on r.id = ti.dag_run_id
              where r.dag_id = 'chain' and r.run_id = any($1) order by r.run_id, ti.task_id`,
            [unsuccessful],
          )
        ).rows
      : [];
    expect({ unsuccessful, why }).toEqual({ unsuccessful: [], why: [] });
    const runs = executions().slice(0);
    expect(overlapping(runs)).toEqual([]);
    const rolling = runs.filter((e) => e.run.startsWith('rolling-'));
    expect(rolling.length).toBe(ids.length * 3);
    expect(executions().length).toBe(before + ids.length * 3);
  }, 400_000);

  it('a rotated signing key works on every replica: a token signed with the new key is accepted by replicas that loaded the ring before the rotation', async () => {
    const [a, b, c] = ['a', 'b', 'c'].map((k) => replicas.get(k)!);
    const rotated = await fetch(`${a!.url}/api/v1/auth/signing-keys/rotate`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(rotated.status).toBe(200);
    const minted = await fetch(`${a!.url}/api/v1/tokens`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'after-rotation', role: 'viewer' }),
    });
    expect(minted.status).toBe(201);
    const fresh = ((await minted.json()) as { token: string }).token;
    for (const r of [a!, b!, c!]) {
      const res = await fetch(`${r.url}/api/v1/dags`, {
        headers: { authorization: `Bearer ${fresh}` },
      });
      expect(`${r.spec.name}: ${res.status}`).toBe(`${r.spec.name}: 200`);
      // The admin token, signed with the retired key, still verifies everywhere.
      const old = await fetch(`${r.url}/api/v1/dags`, {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(old.status).toBe(200);
    }
  }, 120_000);
});
