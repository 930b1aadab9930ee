import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type pg from 'pg';

/**
 * The history checker for fault tests (issue 39). After a case has healed its faults and let the
 * control plane settle (Jepsen's final phase: no fault, then read), it reads what happened from
 * two independent witnesses and checks invariants over the whole history, not a single outcome:
 *
 * - the store, read directly (never through the API the faults may have disturbed): runs,
 *   task instances and their archived tries, logs, XCom, the lease's terms;
 * - the tasks' own marks (`historyTask` below): each execution of a task writes a file with its
 *   run, task, try, pid, start and end, outside the control plane. The store cannot vouch for
 *   itself that a task ran once; the marks can.
 *
 * What a test told the control plane is classified as Jepsen classifies client operations: a
 * trigger the API acknowledged is `ok` (its run must exist and finish: a missing one is a lost
 * write); a trigger whose answer never came is indeterminate (`info`: it may or may not exist,
 * and if it does it must finish like any other). Each check is named, reads from one place, and
 * reports the rows that break it; the history is valid when no check reports anything.
 */

/** One query against the store: PostgreSQL (`$1` placeholders) or SQLite (rewritten to `?`). */
export type HistoryQuery = (sql: string, params?: unknown[]) => Promise<Record<string, unknown>[]>;

export function pgHistory(client: pg.Client | pg.Pool): HistoryQuery {
  return async (sql, params = []) =>
    (await client.query<Record<string, unknown>>(sql, params)).rows;
}

/** A read-only view of Lite's SQLite file (WAL: reads do not block the running server). */
export async function sqliteHistory(file: string): Promise<{ query: HistoryQuery; close(): void }> {
  const { default: Database } = await import('better-sqlite3');
  const db = new Database(file, { readonly: true, fileMustExist: true });
  return {
    query: async (sql, params = []) =>
      db.prepare(sql.replace(/\$\d+/g, '?')).all(...(params as never[])) as Record<
        string,
        unknown
      >[],
    close: () => db.close(),
  };
}

export interface HistoryExpectation {
  dagId: string;
  /** the task ids of every run, in order */
  tasks: string[];
  /** run ids whose trigger the API acknowledged */
  acknowledged: string[];
  /** run ids whose trigger got no answer (may exist; if so must finish) */
  indeterminate?: string[];
  /** the marks directory historyTask writes to */
  marks: string;
  /** Pro: check the scheduler lease's terms (Lite has none) */
  lease: boolean;
}

export interface HistoryReport {
  /** runs that exist for the acknowledged and indeterminate triggers */
  runs: number;
  /** of those, runs in a final state */
  completed: number;
  succeeded: number;
  /** tries beyond the first, over every task instance of these runs: each bump is a try a fault consumed (goal 0) */
  triesConsumed: number;
  /** task instances that executed more than once (marks) */
  duplicates: string[];
  /** task instances with two executions at the same time (marks) */
  overlapping: string[];
  /** terms of the scheduler lease recorded (Pro) */
  leaseTerms: number;
  /** every broken invariant, named by its check; empty when the history is valid */
  problems: string[];
}

/** A task for history-checked DAGs: marks its execution, logs a line, pushes an XCom. */
export function historyTask(
  marks: string,
  taskId: string,
  depends: string[],
  sleepSeconds: number,
): string {
  return `  - task_id: ${taskId}
    depends_on: [${depends.join(', ')}]
    retries: 1
    retry_delay_seconds: 1
    do_xcom_push: true
    command: |
      f="${marks}/\${AIRFLOW_CTX_DAG_RUN_ID}__\${AIRFLOW_CTX_TASK_ID}__\${AIRFLOW_CTX_TRY_NUMBER}__$$"
      echo "start $(date +%s%3N)" > "$f"
      echo "working \${AIRFLOW_CTX_DAG_RUN_ID}/\${AIRFLOW_CTX_TASK_ID}"
      sleep ${sleepSeconds}
      echo "end $(date +%s%3N)" >> "$f"
      echo "{\\"run\\": \\"\${AIRFLOW_CTX_DAG_RUN_ID}\\", \\"task\\": \\"\${AIRFLOW_CTX_TASK_ID}\\"}"
`;
}

/** One execution of a task, as its mark file tells it. */
export interface Execution {
  run: string;
  task: string;
  tryNumber: number;
  pid: number;
  start: number;
  end: number | null;
}

export function readExecutions(marks: string): Execution[] {
  return readdirSync(marks).map((f) => {
    const [run, task, tryNumber, pid] = f.split('__');
    const text = readFileSync(join(marks, f), 'utf8');
    const num = (k: string) => {
      const m = new RegExp(`${k} (\\d+)`).exec(text);
      return m ? Number(m[1]) : null;
    };
    return {
      run: run!,
      task: task!,
      tryNumber: Number(tryNumber),
      pid: Number(pid),
      start: num('start')!,
      end: num('end'),
    };
  });
}

const FINAL = ['success', 'failed'];

/** A column's text as the driver returned it (a string; anything else as JSON). */
const text = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v));

export async function checkHistory(
  query: HistoryQuery,
  exp: HistoryExpectation,
): Promise<HistoryReport> {
  const problems: string[] = [];
  const wanted = new Set([...exp.acknowledged, ...(exp.indeterminate ?? [])]);

  // runs-final — dag_runs: every acknowledged run exists and ended; nothing else appeared.
  const runs = (
    await query('select id, run_id, state from dag_runs where dag_id = $1', [exp.dagId])
  ).map((r) => ({ id: String(r['id']), runId: String(r['run_id']), state: String(r['state']) }));
  const byRunId = new Map(runs.map((r) => [r.runId, r]));
  for (const id of exp.acknowledged) {
    const r = byRunId.get(id);
    if (!r) problems.push(`runs-final: acknowledged run ${id} is not in dag_runs (a lost write)`);
    else if (!FINAL.includes(r.state))
      problems.push(`runs-final: run ${id} is ${r.state}, not final`);
    else if (r.state !== 'success') problems.push(`runs-final: run ${id} ended ${r.state}`);
  }
  for (const id of exp.indeterminate ?? []) {
    const r = byRunId.get(id);
    if (r && !FINAL.includes(r.state))
      problems.push(`runs-final: run ${id} (trigger unanswered) is ${r.state}, not final`);
  }
  for (const r of runs) {
    if (!wanted.has(r.runId)) problems.push(`runs-final: unexpected run ${r.runId} in dag_runs`);
  }
  const mine = runs.filter((r) => wanted.has(r.runId));
  const runIdOf = new Map(mine.map((r) => [r.id, r.runId]));

  // tries — task_instances and task_instance_history: each task instance succeeded on try 1
  // and no try was archived (a retry or a reaped attempt archives one).
  const tis = (
    await query(
      'select id, dag_run_id, task_id, try_number, state, error_message from task_instances where dag_id = $1',
      [exp.dagId],
    )
  ).filter((t) => runIdOf.has(String(t['dag_run_id'])));
  let triesConsumed = 0;
  for (const t of tis) {
    const name = `${runIdOf.get(String(t['dag_run_id']))}/${String(t['task_id'])}`;
    const tryNumber = Number(t['try_number']);
    if (tryNumber !== 1) {
      triesConsumed += tryNumber - 1;
      problems.push(`tries: ${name} is on try ${tryNumber}`);
    }
    if (t['state'] !== 'success' && byRunId.get(runIdOf.get(String(t['dag_run_id']))!)) {
      problems.push(
        `tries: ${name} is ${String(t['state'])}${t['error_message'] ? ` (${text(t['error_message'])})` : ''}`,
      );
    }
  }
  const archived = (
    await query(
      'select h.dag_run_id, h.task_id, h.try_number, h.state, h.error_message from task_instance_history h join dag_runs r on r.id = h.dag_run_id where r.dag_id = $1',
      [exp.dagId],
    )
  ).filter((h) => runIdOf.has(String(h['dag_run_id'])));
  for (const h of archived) {
    problems.push(
      `tries: ${runIdOf.get(String(h['dag_run_id']))}/${String(h['task_id'])} try ${String(h['try_number'])} archived as ${String(h['state'])}${h['error_message'] ? ` (${text(h['error_message'])})` : ''}`,
    );
  }
  const expectedInstances = mine.length * exp.tasks.length;
  if (tis.length !== expectedInstances) {
    problems.push(
      `tries: ${tis.length} task instances for ${mine.length} runs, expected ${expectedInstances}`,
    );
  }

  // executions — the tasks' marks: each task instance executed exactly once, never beside itself.
  const executions = readExecutions(exp.marks).filter((e) => wanted.has(e.run));
  const byInstance = new Map<string, Execution[]>();
  for (const e of executions) {
    const k = `${e.run}/${e.task}`;
    byInstance.set(k, [...(byInstance.get(k) ?? []), e]);
  }
  const duplicates: string[] = [];
  const overlapping: string[] = [];
  for (const [k, list] of byInstance) {
    if (list.length > 1) duplicates.push(k);
    const sorted = [...list].sort((a, b) => a.start - b.start);
    for (let i = 1; i < sorted.length; i++) {
      const prev = sorted[i - 1]!;
      if (prev.end === null || prev.end > sorted[i]!.start) overlapping.push(k);
    }
  }
  for (const k of duplicates)
    problems.push(`executions: ${k} executed ${byInstance.get(k)!.length} times`);
  for (const k of overlapping) problems.push(`executions: ${k} had two executions at once`);
  for (const r of mine.filter((r) => r.state === 'success')) {
    for (const task of exp.tasks) {
      const list = byInstance.get(`${r.runId}/${task}`) ?? [];
      if (list.length === 0)
        problems.push(`executions: ${r.runId}/${task} succeeded without running`);
      else if (list.every((e) => e.end === null))
        problems.push(`executions: ${r.runId}/${task} succeeded but never finished its command`);
    }
  }

  // logs — task_logs: a succeeded attempt's log has its task's line, once, for its try.
  const logs = await query(
    `select l.dag_run_id, l.task_id, l.try_number, l.message from task_logs l join dag_runs r on r.id = l.dag_run_id where r.dag_id = $1 and l.stream = 'stdout'`,
    [exp.dagId],
  );
  const logCount = new Map<string, number>();
  for (const l of logs) {
    const runId = runIdOf.get(String(l['dag_run_id']));
    if (runId === undefined) continue;
    const task = String(l['task_id']);
    if (String(l['message']) === `working ${runId}/${task}`) {
      const k = `${runId}/${task}#${String(l['try_number'])}`;
      logCount.set(k, (logCount.get(k) ?? 0) + 1);
    }
  }
  // xcom — xcom: a succeeded attempt's return value is the JSON its task printed last.
  const xcoms = await query(
    `select x.dag_run_id, x.task_id, x.value from xcom x join dag_runs r on r.id = x.dag_run_id where r.dag_id = $1 and x.key = 'return_value'`,
    [exp.dagId],
  );
  const xcomOf = new Map<string, string>();
  for (const x of xcoms) {
    const runId = runIdOf.get(String(x['dag_run_id']));
    if (runId === undefined) continue;
    const v = x['value'];
    xcomOf.set(`${runId}/${String(x['task_id'])}`, Buffer.from(v as Uint8Array).toString('utf8'));
  }
  for (const t of tis.filter((t) => t['state'] === 'success')) {
    const runId = runIdOf.get(String(t['dag_run_id']))!;
    const task = String(t['task_id']);
    const n = logCount.get(`${runId}/${task}#${String(t['try_number'])}`) ?? 0;
    if (n !== 1) problems.push(`logs: ${runId}/${task} has its line ${n} times in its log`);
    const x = xcomOf.get(`${runId}/${task}`);
    let parsed: { run?: string; task?: string } | undefined;
    try {
      parsed = x === undefined ? undefined : (JSON.parse(x) as { run?: string; task?: string });
    } catch {
      parsed = undefined;
    }
    if (parsed?.run !== runId || parsed.task !== task) {
      problems.push(
        `xcom: ${runId}/${task} return_value is ${x === undefined ? 'missing' : JSON.stringify(x)}`,
      );
    }
  }

  // lease — scheduler_lease_terms: epochs 1, 2, … with no gap, and no term begins before the
  // one before it ended (one scheduler at a time, by the database's own record).
  let leaseTerms = 0;
  if (exp.lease) {
    const terms = (
      await query(
        `select epoch, holder, granted_at, expires_at from scheduler_lease_terms where name = 'scheduler' order by epoch`,
      )
    ).map((t) => ({
      epoch: Number(t['epoch']),
      holder: String(t['holder']),
      granted: Number(t['granted_at']),
      expires: Number(t['expires_at']),
    }));
    leaseTerms = terms.length;
    if (terms.length === 0) problems.push('lease: no term was ever granted');
    for (let i = 0; i < terms.length; i++) {
      const t = terms[i]!;
      if (t.epoch !== i + 1) problems.push(`lease: epoch ${t.epoch} where ${i + 1} was next`);
      const prev = terms[i - 1];
      if (prev && t.granted < prev.expires) {
        problems.push(
          `lease: epoch ${t.epoch} (${t.holder}) began ${prev.expires - t.granted} ms before epoch ${prev.epoch} (${prev.holder}) ended`,
        );
      }
    }
  }

  return {
    runs: mine.length,
    completed: mine.filter((r) => FINAL.includes(r.state)).length,
    succeeded: mine.filter((r) => r.state === 'success').length,
    triesConsumed,
    duplicates,
    overlapping,
    leaseTerms,
    problems,
  };
}
