import { appendFileSync, chmodSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import {
  checkHistory,
  historyTask,
  pgHistory,
  readExecutions,
  type HistoryReport,
} from '../../support/history-checker.js';
import {
  adminToken,
  freePort,
  startReplica,
  vaultKey,
  type Replica,
  type ReplicaSpec,
} from '../../support/pro-cluster.js';
import { scratchDir, writeDag } from '../../support/processes.js';
import { startTcpProxy, type TcpProxy } from '../../support/tcp-proxy.js';
import {
  startThrowawayPostgres,
  type ThrowawayPostgres,
} from '../../support/throwaway-postgres.js';

/**
 * One fault case of test/e2e/pro-faults: its own PostgreSQL cluster (a throwaway, never the
 * shared one), two `leoflow server --role all` replicas each advertising its own agent URL with
 * the list given to both (the setup of issue 39's new user, who has no load balancer), a slow
 * chain DAG whose tasks mark their executions, readiness polled throughout, and the history
 * checker at the end. Optional proxies put a TCP hop the test controls between a replica and
 * PostgreSQL, or between the agents and a replica's agent port.
 */

export const DAG = 'slow_chain';
export const TASKS = ['t1', 't2', 't3'];
/** lease ttl / renew / margin: a takeover within ~3.5 s */
export const LEASE: ReplicaSpec['lease'] = ['3s', '500ms', '1s'];
export const LEASE_TTL_MS = 3_000;

export interface FaultCaseOptions {
  label: string;
  /** seconds each task sleeps */
  sleepSeconds?: number;
  /** each replica reaches PostgreSQL through a proxy of its own */
  dbProxies?: boolean;
  /** the agents reach each replica's agent port through a proxy of its own (the advertised URLs) */
  agentProxies?: boolean;
  /** a replica's own entry (the clock replica), by name */
  entry?: Partial<Record<'a' | 'b', string>>;
  agentLostThreshold?: string;
}

export interface ReadinessSample {
  /** when the probe was sent */
  at: number;
  /** when its answer (or its failure) came: the answer may tell the state at any moment between */
  done: number;
  replica: string;
  /** 200, 503, or 'down' (refused, reset or no answer within PROBE_TIMEOUT_MS) */
  status: number | 'down';
  failing: string[];
}

export interface FaultFigures {
  fault: string;
  runsInFlight: number;
  runsCompleted: number;
  triesConsumed: number;
  duplicateOrOverlapping: number;
  /** fault → the first task execution that started after it */
  recoveryMs: number | null;
  /** the same case's baseline: trigger → the run's first task started, median (healthy) */
  baselineStartMs: number | null;
  readinessTruthful: boolean;
  readinessNote: string;
  problems: string[];
}

export interface FaultCase {
  pg: ThrowawayPostgres;
  /**
   * the test's own connections to the database (never through a proxy): a pool, so a restart of
   * the case's PostgreSQL costs the test a reconnect, not its witness
   */
  db: pg.Pool;
  replicas: Map<'a' | 'b', Replica>;
  dbProxies: Map<'a' | 'b', TcpProxy>;
  agentProxies: Map<'a' | 'b', TcpProxy>;
  token: string;
  marks: string;
  acknowledged: string[];
  indeterminate: string[];
  readiness: ReadinessSample[];
  /** POSTs a run through the replicas in turn: 'ok' when acknowledged, else 'info' */
  trigger(runId: string): Promise<'ok' | 'info'>;
  /** the replica that leads now (by /readyz), waiting for one */
  leader(withinMs?: number): Promise<'a' | 'b'>;
  /** runs not yet final, read from the database */
  runsInFlight(): Promise<number>;
  /** waits until every acknowledged (and existing indeterminate) run is final */
  settle(withinMs: number): Promise<void>;
  /** restarts a stopped replica on its own ports */
  restart(name: 'a' | 'b'): Promise<Replica>;
  /** the history checker over this case, and the figures for docs/pro.md */
  finish(
    fault: string,
    faultAt: number,
    readiness: { truthful: boolean; note: string },
  ): Promise<{
    report: HistoryReport;
    figures: FaultFigures;
  }>;
  close(): Promise<void>;
}

/**
 * A probe's own timeout: above the readiness store check's 2 s budget (a probe that gives up
 * before the replica's own check can answer measures the prober, not the replica).
 */
const PROBE_TIMEOUT_MS = 3_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function readyz(r: Replica): Promise<ReadinessSample> {
  const at = Date.now();
  try {
    const res = await fetch(`${r.url}/readyz`, { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
    const body = (await res.json()) as { checks: { name: string; ok: boolean; detail: string }[] };
    return {
      at,
      done: Date.now(),
      replica: r.spec.name,
      status: res.status,
      failing: body.checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail}`),
    };
  } catch {
    return { at, done: Date.now(), replica: r.spec.name, status: 'down', failing: [] };
  }
}

export async function leadsNow(r: Replica): Promise<boolean> {
  try {
    const res = await fetch(`${r.url}/readyz`, { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
    const body = (await res.json()) as { checks: { name: string; detail: string }[] };
    return body.checks.some((c) => c.name === 'leader' && c.detail === 'this replica');
  } catch {
    return false;
  }
}

export async function startFaultCase(o: FaultCaseOptions): Promise<FaultCase> {
  const scratch = scratchDir(`leoflow-fault-${o.label}-`);
  const marks = join(scratch.dir, 'marks');
  mkdirSync(marks, { mode: 0o777 });
  chmodSync(marks, 0o777);
  const dags = join(scratch.dir, 'dags');
  const sleepSeconds = o.sleepSeconds ?? 2;
  writeDag(
    dags,
    DAG,
    `dag_id: ${DAG}\nmax_active_runs: 16\ntasks:\n${TASKS.map((t, i) => historyTask(marks, t, i === 0 ? [] : [TASKS[i - 1]!], sleepSeconds)).join('')}`,
  );
  const cleanups: (() => Promise<void> | void)[] = [() => scratch.cleanup()];
  const closeAll = async () => {
    for (const c of cleanups.reverse()) await Promise.resolve(c()).catch(() => undefined);
  };
  try {
    const postgres = await startThrowawayPostgres(o.label);
    cleanups.push(() => postgres.destroy());
    const db = new pg.Pool({ connectionString: postgres.url, max: 2 });
    db.on('error', () => undefined);
    cleanups.push(() => db.end());

    const names = ['a', 'b'] as const;
    const ports = new Map<'a' | 'b', { http: number; agent: number }>();
    for (const n of names) ports.set(n, { http: await freePort(), agent: await freePort() });
    const dbProxies = new Map<'a' | 'b', TcpProxy>();
    const agentProxies = new Map<'a' | 'b', TcpProxy>();
    for (const n of names) {
      if (o.dbProxies) dbProxies.set(n, await startTcpProxy({ port: postgres.port }));
      if (o.agentProxies) agentProxies.set(n, await startTcpProxy({ port: ports.get(n)!.agent }));
    }
    cleanups.push(async () => {
      for (const p of [...dbProxies.values(), ...agentProxies.values()]) await p.close();
    });
    // Every replica's agent URL, the list given to both (each puts its own first).
    const agentUrls = names
      .map((n) => agentProxies.get(n)?.url ?? `http://127.0.0.1:${ports.get(n)!.agent}`)
      .join(',');
    const env = { LEOFLOW_SECRET_KEY: vaultKey() };
    const specOf = (n: 'a' | 'b'): ReplicaSpec => ({
      name: n,
      role: 'all',
      root: join(scratch.dir, 'replicas'),
      keysDir: join(scratch.dir, 'keys'),
      databaseUrl: dbProxies.has(n)
        ? postgres.url.replace(`:${postgres.port}/`, `:${dbProxies.get(n)!.port}/`)
        : postgres.url,
      agentServiceUrl: agentUrls,
      dagsFolder: dags,
      writablePaths: [scratch.dir],
      env,
      lease: LEASE,
      ...(o.entry?.[n] ? { entry: o.entry[n] } : {}),
      ...(o.agentLostThreshold ? { agentLostThreshold: o.agentLostThreshold } : {}),
    });
    const replicas = new Map<'a' | 'b', Replica>();
    cleanups.push(async () => {
      for (const r of replicas.values()) {
        if (r.proc.signalCode === 'SIGSTOP' || r.proc.exitCode === null) {
          try {
            process.kill(r.proc.pid!, 'SIGCONT');
          } catch {
            // gone
          }
        }
        await r.kill9();
      }
      killAgentsOf(
        names.map((n) => ports.get(n)!.agent).concat([...agentProxies.values()].map((p) => p.port)),
      );
    });
    // a first: it mints the keyrings and the admin token, and leads
    replicas.set('a', await startReplica(specOf('a'), ports.get('a')));
    const token = adminToken(join(scratch.dir, 'keys'));
    replicas.set('b', await startReplica(specOf('b'), ports.get('b')));

    const readiness: ReadinessSample[] = [];
    let polling = true;
    const poller = (async () => {
      while (polling) {
        const started = Date.now();
        const samples = await Promise.all([...replicas.values()].map(readyz));
        readiness.push(...samples);
        await sleep(Math.max(0, 250 - (Date.now() - started)));
      }
    })();
    cleanups.push(async () => {
      polling = false;
      await poller;
    });

    const acknowledged: string[] = [];
    const triggeredAt = new Map<string, number>();
    const indeterminate: string[] = [];
    const trigger = async (runId: string): Promise<'ok' | 'info'> => {
      for (let round = 0; round < 20; round++) {
        for (const r of replicas.values()) {
          if (r.proc.exitCode !== null || r.proc.signalCode !== null) continue;
          try {
            const res = await fetch(`${r.url}/api/v1/dags/${DAG}/runs`, {
              method: 'POST',
              headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
              body: JSON.stringify({ run_id: runId }),
              signal: AbortSignal.timeout(5_000),
            });
            if (res.status === 201 || res.status === 200 || res.status === 409) {
              acknowledged.push(runId);
              triggeredAt.set(runId, Date.now());
              return 'ok';
            }
            // 503 (draining, store unavailable): nothing was created; try the next replica
          } catch {
            // no answer: the run may or may not exist
            if (!indeterminate.includes(runId)) indeterminate.push(runId);
          }
        }
        await sleep(500);
      }
      return 'info';
    };

    const finalStates = "('success', 'failed')";
    const c: FaultCase = {
      pg: postgres,
      db,
      replicas,
      dbProxies,
      agentProxies,
      token,
      marks,
      acknowledged,
      indeterminate,
      readiness,
      trigger,
      async leader(withinMs = 30_000) {
        const until = Date.now() + withinMs;
        for (;;) {
          for (const [n, r] of replicas) if (await leadsNow(r)) return n;
          if (Date.now() > until) throw new Error('no replica leads');
          await sleep(200);
        }
      },
      async runsInFlight() {
        const { rows } = await db.query<{ n: string }>(
          `select count(*) as n from dag_runs where dag_id = $1 and state not in ${finalStates}`,
          [DAG],
        );
        return Number(rows[0]!.n);
      },
      async settle(withinMs) {
        const until = Date.now() + withinMs;
        for (;;) {
          const { rows } = await db
            .query<{ run_id: string; state: string }>(
              'select run_id, state from dag_runs where dag_id = $1',
              [DAG],
            )
            .catch(() => ({ rows: [] as { run_id: string; state: string }[] }));
          const states = new Map(rows.map((r) => [r.run_id, r.state]));
          const open = acknowledged.filter(
            (id) => !['success', 'failed'].includes(states.get(id) ?? ''),
          );
          const openInfo = indeterminate.filter(
            (id) => states.has(id) && !['success', 'failed'].includes(states.get(id)!),
          );
          if (open.length === 0 && openInfo.length === 0) return;
          if (Date.now() > until) {
            const tis = await db.query(
              `select r.run_id, ti.task_id, ti.state, ti.try_number, ti.error_message from task_instances ti join dag_runs r on r.id = ti.dag_run_id where r.dag_id = $1 and r.state not in ${finalStates} order by 1, 2`,
              [DAG],
            );
            throw new Error(
              `runs not final after ${withinMs} ms: ${[...open, ...openInfo].join(', ')}\n${JSON.stringify(tis.rows)}\n${[...replicas.values()].map((r) => `--- ${r.spec.name}\n${r.output().slice(-4000)}`).join('\n')}`,
            );
          }
          await sleep(500);
        }
      },
      async restart(name) {
        const r = await startReplica(specOf(name), ports.get(name));
        replicas.set(name, r);
        return r;
      },
      async finish(fault, faultAt, truth) {
        const report = await checkHistory(pgHistory(db), {
          dagId: DAG,
          tasks: TASKS,
          acknowledged,
          indeterminate,
          marks,
          lease: true,
        });
        const figures: FaultFigures = {
          fault,
          runsInFlight: inFlightAtFault,
          runsCompleted: report.completed,
          triesConsumed: report.triesConsumed,
          duplicateOrOverlapping: new Set([...report.duplicates, ...report.overlapping]).size,
          recoveryMs: recoveryAfter(marks, faultAt),
          baselineStartMs: baselineStart(marks, triggeredAt, faultAt),
          readinessTruthful: truth.truthful,
          readinessNote: truth.note,
          problems: report.problems,
        };
        recordFigures(figures);
        return { report, figures };
      },
      close: closeAll,
    };
    let inFlightAtFault = 0;
    const measure = c.runsInFlight.bind(c);
    c.runsInFlight = async () => {
      inFlightAtFault = await measure();
      return inFlightAtFault;
    };
    return c;
  } catch (err) {
    await closeAll();
    throw err;
  }
}

/** The first task execution that started after the fault: work flows again. */
export function recoveryAfter(marks: string, faultAt: number): number | null {
  const starts = readExecutions(marks)
    .map((e) => e.start)
    .filter((s) => s > faultAt)
    .sort((a, b) => a - b);
  return starts.length > 0 ? starts[0]! - faultAt : null;
}

/**
 * The same case's healthy baseline for "fault → first progress": trigger acknowledged → the run's
 * first task started, median over the runs triggered before the fault.
 */
export function baselineStart(
  marks: string,
  triggeredAt: Map<string, number>,
  faultAt: number,
): number | null {
  const gaps: number[] = [];
  for (const e of readExecutions(marks)) {
    const at = triggeredAt.get(e.run);
    if (e.task === TASKS[0] && at !== undefined && at < faultAt && e.start < faultAt) {
      gaps.push(e.start - at);
    }
  }
  if (gaps.length === 0) return null;
  gaps.sort((x, y) => x - y);
  return gaps[Math.floor(gaps.length / 2)]!;
}

/** Figures go to stdout and, for `npm run bench`, to LEOFLOW_FAULT_FIGURES (a JSON line each). */
export function recordFigures(f: FaultFigures): void {
  process.stdout.write(`fault figures ${JSON.stringify(f)}\n`);
  const file = process.env['LEOFLOW_FAULT_FIGURES'];
  if (file) appendFileSync(file, `${JSON.stringify(f)}\n`);
}

/**
 * Agents are detached: a case that fails half way must not leave them retrying its replicas for
 * their 15-minute report deadline. Every process whose LEOFLOW_AGENT_URL names one of this
 * case's ports is killed with its group.
 */
function killAgentsOf(ports: number[]): void {
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    let env: string;
    try {
      env = readFileSync(`/proc/${pid}/environ`, 'utf8');
    } catch {
      continue;
    }
    const url = /(?:^|\0)LEOFLOW_AGENT_URL=([^\0]*)/.exec(env)?.[1];
    if (url && ports.some((p) => url.includes(`:${p}`))) {
      try {
        process.kill(-Number(pid), 'SIGKILL');
      } catch {
        try {
          process.kill(Number(pid), 'SIGKILL');
        } catch {
          // gone
        }
      }
    }
  }
}

/**
 * Readiness told the truth when every sample agrees with what the case knows: `expect(sample)`
 * answers what the replica should have said at that moment ('ready', 'not-ready', or 'any' while
 * a change is in flight), and the first disagreement is named.
 */
export function readinessVerdict(
  samples: ReadinessSample[],
  expect: (s: ReadinessSample) => 'ready' | 'not-ready' | 'any',
): { truthful: boolean; note: string } {
  let checked = 0;
  for (const s of samples) {
    const want = expect(s);
    if (want === 'any') continue;
    checked++;
    const ready = s.status === 200;
    if (want === 'ready' && !ready) {
      return {
        truthful: false,
        note: `replica ${s.replica} answered ${s.status} (${s.failing.join('; ')}) at +${s.at} while it should have been ready`,
      };
    }
    if (want === 'not-ready' && ready) {
      return {
        truthful: false,
        note: `replica ${s.replica} answered 200 at ${s.at} while it should not have been ready`,
      };
    }
  }
  return { truthful: true, note: `${checked} samples as expected` };
}
