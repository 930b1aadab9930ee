import { describe, expect, it } from 'vitest';
import {
  DAG_SCHEMA_VERSION,
  branchFromExitCode,
  branchFromReturnValue,
  clearTargets,
  expandTask,
  mappableList,
  mappedConsumersLimit,
  planRun,
  runOutcome,
  shortCircuitDecision,
  type DagSpec,
  type RunStates,
  type TaskInstanceState,
  type TaskSpecDef,
} from '@leoflow/core';

function task(id: string, deps: string[] = [], extra: Partial<TaskSpecDef> = {}): TaskSpecDef {
  return {
    task_id: id,
    type: 'bash',
    command: 'true',
    depends_on: deps,
    trigger_rule: 'all_success',
    retries: 0,
    retry_delay_seconds: 0,
    execution_timeout_seconds: null,
    env: {},
    variables: [],
    connections: [],
    do_xcom_push: false,
    ...extra,
  };
}

function dag(tasks: TaskSpecDef[], extra: Partial<DagSpec> = {}): DagSpec {
  return {
    schema_version: DAG_SCHEMA_VERSION,
    dag_id: 'shapes',
    description: '',
    owner: '',
    tags: [],
    schedule: null,
    schedule_timezone: 'UTC',
    start_date: null,
    end_date: null,
    catchup: false,
    max_active_runs: 1,
    max_active_tasks: 0,
    defaults: { retries: 0, retry_delay_seconds: 0, execution_timeout_seconds: null },
    params: {},
    variables: [],
    connections: [],
    ...extra,
    tasks,
  };
}

const st = (o: Record<string, TaskInstanceState | TaskInstanceState[]>): RunStates =>
  new Map(Object.entries(o));

const teardown = (extra: Partial<TaskSpecDef> = {}): Partial<TaskSpecDef> => ({
  teardown: true,
  trigger_rule: 'all_done_setup_success',
  ...extra,
});

// create_cluster (setup) → run_query → delete_cluster (teardown of create_cluster) → report
const CLUSTER = dag([
  task('create_cluster', [], { setup: true }),
  task('run_query', ['create_cluster']),
  task('summarize', ['run_query']),
  task('delete_cluster', ['create_cluster', 'summarize'], teardown()),
  task('report', ['summarize']),
]);

describe('setup and teardown (Airflow 3)', () => {
  it('runs the teardown when its setup succeeded, whatever happened between', () => {
    const plan = planRun(
      CLUSTER,
      st({
        create_cluster: 'success',
        run_query: 'failed',
        summarize: 'upstream_failed',
        report: 'upstream_failed',
      }),
    );
    expect(plan.schedule).toEqual(['delete_cluster']);
  });

  it('waits for every task in the teardown scope to finish (not only its direct upstreams)', () => {
    // w2 runs at once (always), so t's direct upstreams can be done while w1 — between t's setup
    // and t — still runs: Airflow 3.3's _evaluate_teardown_scope keeps t waiting for it.
    const d = dag([
      task('s', [], { setup: true }),
      task('w1', ['s']),
      task('w2', ['w1'], { trigger_rule: 'always' }),
      task('t', ['s', 'w2'], teardown()),
    ]);
    expect(planRun(d, st({ s: 'success', w1: 'running', w2: 'success' })).schedule).toEqual([]);
    expect(planRun(d, st({ s: 'success', w1: 'failed', w2: 'success' })).schedule).toEqual(['t']);
    // a task downstream of the setup but not upstream of the teardown is outside its scope
    const outside = dag([
      task('s', [], { setup: true }),
      task('w1', ['s']),
      task('t', ['s'], teardown()),
    ]);
    expect(planRun(outside, st({ s: 'success', w1: 'running' })).schedule).toEqual(['t']);
  });

  it('upstream-fails the teardown when no setup succeeded, and skips it when every setup was skipped', () => {
    expect(planRun(CLUSTER, st({ create_cluster: 'failed' })).upstreamFailed).toEqual([
      'run_query',
      'summarize',
      'delete_cluster',
      'report',
    ]);
    expect(planRun(CLUSTER, st({ create_cluster: 'skipped' })).skip).toEqual([
      'run_query',
      'summarize',
      'delete_cluster',
      'report',
    ]);
  });

  it('applies the setup constraint: a task waits for its indirect setups and fails or skips with them', () => {
    // summarize depends on run_query only, but create_cluster is a relevant setup of it
    // (its teardown delete_cluster is downstream of summarize).
    expect(
      planRun(CLUSTER, st({ create_cluster: 'running', run_query: 'success' })).schedule,
    ).toEqual([]);
    expect(
      planRun(CLUSTER, st({ create_cluster: 'success', run_query: 'success' })).schedule,
    ).toEqual(['summarize']);
    const d = dag([
      task('s', [], { setup: true }),
      task('a', ['s'], { trigger_rule: 'all_done' }),
      task('b', ['a'], { trigger_rule: 'all_done' }),
      task('t', ['s', 'b'], teardown()),
    ]);
    // b's own rule (all_done) is met, but its setup s failed: upstream_failed, as in Airflow
    // (and so is the teardown, none of whose setups succeeded).
    const plan = planRun(d, st({ s: 'failed', a: 'success' }));
    expect(plan.upstreamFailed).toEqual(['b', 't']);
    expect(planRun(d, st({ s: 'skipped', a: 'success' })).skip).toEqual(['b', 't']);
    expect(planRun(d, st({ s: 'running', a: 'success' })).upstreamFailed).toEqual([]);
  });

  it('ignores a teardown failure in the run state unless on_failure_fail_dagrun', () => {
    const done = st({
      create_cluster: 'success',
      run_query: 'success',
      summarize: 'success',
      delete_cluster: 'failed',
      report: 'success',
    });
    expect(runOutcome(CLUSTER, done)).toBe('success');
    const strict = dag(
      CLUSTER.tasks.map((t) =>
        t.task_id === 'delete_cluster' ? { ...t, on_failure_fail_dagrun: true } : t,
      ),
    );
    expect(runOutcome(strict, done)).toBe('failed');
    // the work failing still fails the run through its effective leaf
    expect(
      runOutcome(
        CLUSTER,
        st({
          create_cluster: 'success',
          run_query: 'success',
          summarize: 'failed',
          delete_cluster: 'success',
          report: 'upstream_failed',
        }),
      ),
    ).toBe('failed');
  });

  it('clears the relevant setups and their teardowns with a task', () => {
    expect(clearTargets(CLUSTER, ['run_query'], { downstream: false })).toEqual([
      'create_cluster',
      'run_query',
      'delete_cluster',
    ]);
    expect(clearTargets(CLUSTER, ['report'], { downstream: false })).toEqual(['report']);
    expect(clearTargets(CLUSTER, ['run_query'], { downstream: true })).toEqual([
      'create_cluster',
      'run_query',
      'summarize',
      'delete_cluster',
      'report',
    ]);
    // a setup without teardown is relevant to everything downstream of it
    const d = dag([task('s', [], { setup: true }), task('w', ['s'])]);
    expect(clearTargets(d, ['w'], { downstream: false })).toEqual(['s', 'w']);
  });
});

// branch → [fast, slow]; fast → join; slow → join; branch → join (the "join" special case)
const BRANCHY = dag([
  task('choose', [], { branch: { mode: 'return_value' }, do_xcom_push: true }),
  task('fast', ['choose']),
  task('slow', ['choose']),
  task('slow_2', ['slow']),
  task('join', ['choose', 'fast', 'slow_2'], { trigger_rule: 'none_failed_min_one_success' }),
  task('after_join', ['join']),
]);

describe('branching (Airflow BranchMixIn / skip_all_except)', () => {
  it('follows the named tasks, skips the other direct downstreams, and the join still runs', () => {
    const out = branchFromReturnValue(BRANCHY, 'choose', '"fast"');
    expect(out).toEqual({ ok: true, decision: { followed: ['fast', 'join'], skipped: ['slow'] } });
    if (!out.ok) return;
    const skipped = new Set(out.decision.skipped);
    let states: Record<string, TaskInstanceState> = { choose: 'success' };
    let plan = planRun(BRANCHY, st(states), { skippedByDecision: skipped });
    expect(plan.schedule).toEqual(['fast']);
    expect(plan.skip).toEqual(['slow', 'slow_2']);
    states = { ...states, fast: 'success', slow: 'skipped', slow_2: 'skipped' };
    plan = planRun(BRANCHY, st(states), { skippedByDecision: skipped });
    expect(plan.schedule).toEqual(['join']);
  });

  it('reads a JSON list, null (follow nothing) and plain text', () => {
    expect(branchFromReturnValue(BRANCHY, 'choose', '["fast", "slow"]')).toMatchObject({
      decision: { skipped: [] },
    });
    expect(branchFromReturnValue(BRANCHY, 'choose', 'null')).toMatchObject({
      decision: { followed: [], skipped: ['fast', 'slow', 'join'] },
    });
    expect(branchFromReturnValue(BRANCHY, 'choose', '  slow \n')).toMatchObject({
      decision: { followed: ['slow', 'join'], skipped: ['fast'] },
    });
  });

  it('refuses a task id that is not in the DAG, a malformed value and no value, with codes', () => {
    const bad = branchFromReturnValue(BRANCHY, 'choose', '["fast", "fsat"]');
    expect(bad).toMatchObject({ ok: false, code: 'LF_BRANCH_INVALID' });
    expect(!bad.ok && bad.message).toMatch(/"fsat".*fast, slow, join/);
    expect(branchFromReturnValue(BRANCHY, 'choose', '{"a": 1}')).toMatchObject({
      ok: false,
      code: 'LF_BRANCH_INVALID',
    });
    expect(branchFromReturnValue(BRANCHY, 'choose', undefined)).toMatchObject({
      ok: false,
      code: 'LF_BRANCH_NO_RESULT',
    });
  });

  it('expands a task group id into the group roots', () => {
    const d = dag(
      [
        task('choose', [], { branch: { mode: 'return_value' }, do_xcom_push: true }),
        task('load.a', ['choose'], { group: 'load' }),
        task('load.b', ['load.a'], { group: 'load' }),
        task('other', ['choose']),
      ],
      { task_groups: [{ group_id: 'load' }] },
    );
    expect(branchFromReturnValue(d, 'choose', '"load"')).toEqual({
      ok: true,
      decision: { followed: ['load.a'], skipped: ['other'] },
    });
  });

  it('maps exit codes to branches; an unmapped code is left to the ordinary outcome', () => {
    const d = dag([
      task('check', [], {
        branch: { mode: 'exit_code', exit_codes: { '0': ['full'], '3': ['incremental'] } },
      }),
      task('full', ['check']),
      task('incremental', ['check']),
    ]);
    expect(branchFromExitCode(d, 'check', 3)).toEqual({
      ok: true,
      decision: { followed: ['incremental'], skipped: ['full'] },
    });
    expect(branchFromExitCode(d, 'check', 1)).toBeUndefined();
    expect(branchFromExitCode(BRANCHY, 'choose', 0)).toBeUndefined();
  });

  it('short-circuits: a falsy value skips all downstream (or only direct ones), never a teardown', () => {
    const d = dag([
      task('s', [], { setup: true }),
      task('gate', ['s'], {
        short_circuit: { ignore_downstream_trigger_rules: true },
        do_xcom_push: true,
      }),
      task('a', ['gate']),
      task('b', ['a'], { trigger_rule: 'all_done' }),
      task('t', ['s', 'b'], teardown()),
    ]);
    for (const falsy of ['false', '0', '""', 'null', '[]', '{}']) {
      expect(shortCircuitDecision(d, 'gate', falsy)).toEqual({
        ok: true,
        decision: { followed: [], skipped: ['a', 'b'] },
      });
    }
    expect(shortCircuitDecision(d, 'gate', 'true')).toEqual({
      ok: true,
      decision: { followed: ['a'], skipped: [] },
    });
    expect(shortCircuitDecision(d, 'gate', 'go on')).toMatchObject({ decision: { skipped: [] } });
    const direct = dag(
      d.tasks.map((t) =>
        t.task_id === 'gate'
          ? { ...t, short_circuit: { ignore_downstream_trigger_rules: false } }
          : t,
      ),
    );
    const out = shortCircuitDecision(direct, 'gate', 'false');
    expect(out).toEqual({ ok: true, decision: { followed: [], skipped: ['a'] } });
    // b (all_done) then runs by its own rule once a is skipped
    const plan = planRun(direct, st({ s: 'success', gate: 'success', a: 'skipped' }), {
      skippedByDecision: new Set(['a']),
    });
    expect(plan.schedule).toEqual(['b']);
  });
});

describe('dynamic task mapping', () => {
  const MAPPED = dag([
    task('list_files', [], { do_xcom_push: true }),
    task('process', ['list_files'], { expand: [{ env: 'FILE', xcom: 'list_files' }] }),
    task('reduce', ['process']),
  ]);

  it('expands a mapped task when its trigger rule is met, and counts every map index downstream', () => {
    expect(planRun(MAPPED, st({ list_files: 'success' }))).toMatchObject({
      expand: ['process'],
      schedule: [],
    });
    expect(
      planRun(MAPPED, st({ list_files: 'success', process: ['success', 'running'] })).schedule,
    ).toEqual([]);
    expect(
      planRun(MAPPED, st({ list_files: 'success', process: ['success', 'success'] })).schedule,
    ).toEqual(['reduce']);
    expect(
      planRun(MAPPED, st({ list_files: 'success', process: ['success', 'failed'] })).upstreamFailed,
    ).toEqual(['reduce']);
    expect(runOutcome(MAPPED, st({ list_files: 'success', process: ['success', 'running'] }))).toBe(
      'running',
    );
  });

  it('crosses several arguments, the last varying fastest, as Airflow does', () => {
    const out = expandTask(
      {
        task_id: 'p',
        expand: [
          { env: 'X', values: [1, 2] },
          { env: 'Y', xcom: 'up' },
        ],
      },
      new Map([['up', ['a', { k: 1 }]]]),
    );
    expect(out).toEqual({
      ok: true,
      indexes: [
        { X: '1', Y: 'a' },
        { X: '1', Y: '{"k":1}' },
        { X: '2', Y: 'a' },
        { X: '2', Y: '{"k":1}' },
      ],
    });
    expect(expandTask({ task_id: 'p', expand: [{ env: 'X', values: [] }] }, new Map())).toEqual({
      ok: true,
      indexes: [],
    });
    expect(
      expandTask(
        { task_id: 'p', expand: [{ env: 'X', values: [1, 2, 3] }], max_map_length: 2 },
        new Map(),
      ),
    ).toMatchObject({ ok: false, code: 'LF_MAP_TOO_LONG' });
  });

  it('checks a mapped-over return value: a JSON list within max_map_length', () => {
    expect(mappableList('["a","b"]', 10, 'up')).toEqual({ ok: true, values: ['a', 'b'] });
    expect(mappableList('{"a":1}', 10, 'up')).toMatchObject({
      ok: false,
      code: 'LF_MAP_NOT_A_LIST',
    });
    expect(mappableList('a b c', 10, 'up')).toMatchObject({ ok: false, code: 'LF_MAP_NOT_A_LIST' });
    expect(mappableList('[1,2,3]', 2, 'up')).toMatchObject({ ok: false, code: 'LF_MAP_TOO_LONG' });
    expect(mappedConsumersLimit(MAPPED, 'list_files')).toBe(1024);
    expect(mappedConsumersLimit(MAPPED, 'process')).toBeUndefined();
  });
});
