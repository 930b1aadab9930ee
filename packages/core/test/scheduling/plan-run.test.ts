import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  DAG_SCHEMA_VERSION,
  TASK_INSTANCE_STATES,
  TRIGGER_RULES,
  downstreamOf,
  isTerminal,
  planRun,
  runOutcome,
  type DagSpec,
  type TaskInstanceState,
  type TaskSpecDef,
  type TriggerRule,
} from '@leoflow/core';

type T = [id: string, deps?: string[], rule?: TriggerRule];

function task(id: string, deps: string[] = [], rule: TriggerRule = 'all_success'): TaskSpecDef {
  return {
    task_id: id,
    type: 'bash',
    command: 'true',
    depends_on: deps,
    trigger_rule: rule,
    retries: 0,
    retry_delay_seconds: 0,
    execution_timeout_seconds: null,
    env: {},
    variables: [],
    connections: [],
    do_xcom_push: false,
  };
}

function dag(...tasks: T[]): DagSpec {
  return {
    schema_version: DAG_SCHEMA_VERSION,
    dag_id: 'etl',
    description: '',
    owner: 'test',
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
    tasks: tasks.map(([id, deps, rule]) => task(id, deps, rule)),
  };
}

function st(obj: Record<string, TaskInstanceState>): Map<string, TaskInstanceState> {
  return new Map(Object.entries(obj));
}

const empty = { schedule: [], skip: [], upstreamFailed: [], expand: [] };

// extract → transform → load, plus a notify that runs whatever happens and an alert on failure.
const ETL = dag(
  ['extract'],
  ['transform', ['extract']],
  ['load', ['transform']],
  ['notify', ['load'], 'all_done'],
  ['alert', ['extract', 'transform', 'load'], 'one_failed'],
);

describe('planRun', () => {
  it('schedules only the roots of a fresh run', () => {
    expect(planRun(ETL, new Map())).toEqual({ ...empty, schedule: ['extract'] });
  });

  it('counts a task missing from the states map as none', () => {
    expect(planRun(ETL, st({ extract: 'success' }))).toEqual({ ...empty, schedule: ['transform'] });
  });

  it('leaves every task that is not in none alone', () => {
    const states = st({
      extract: 'success',
      transform: 'running',
      load: 'scheduled',
      notify: 'up_for_retry',
      alert: 'queued',
    });
    expect(planRun(ETL, states)).toEqual(empty);
  });

  it('cascades an upstream failure through a whole chain in one tick', () => {
    const plan = planRun(ETL, st({ extract: 'failed' }));
    expect(plan).toEqual({
      schedule: ['notify', 'alert'],
      skip: [],
      upstreamFailed: ['transform', 'load'],
      expand: [],
    });
  });

  it('cascades skips, and a one_failed task is skipped once everything upstream is done clean', () => {
    const plan = planRun(ETL, st({ extract: 'skipped' }));
    expect(plan).toEqual({
      schedule: ['notify'],
      skip: ['transform', 'load', 'alert'],
      upstreamFailed: [],
      expand: [],
    });
  });

  it('keeps a downstream of a newly scheduled task waiting', () => {
    const d = dag(['a'], ['b', ['a']], ['c', ['b'], 'all_done']);
    expect(planRun(d, st({ a: 'success' }))).toEqual({ ...empty, schedule: ['b'] });
  });

  it('waits on an upstream that is up for retry', () => {
    expect(planRun(ETL, st({ extract: 'up_for_retry' }))).toEqual(empty);
  });

  it('evaluates each task with its own trigger rule', () => {
    const d = dag(
      ['a'],
      ['b'],
      ['s', ['a', 'b'], 'all_success'],
      ['f', ['a', 'b'], 'all_failed'],
      ['d', ['a', 'b'], 'all_done'],
      ['os', ['a', 'b'], 'one_success'],
      ['of', ['a', 'b'], 'one_failed'],
    );
    expect(planRun(d, st({ a: 'success', b: 'running' }))).toEqual({
      schedule: ['os'],
      skip: ['f'],
      upstreamFailed: [],
      expand: [],
    });
    expect(planRun(d, st({ a: 'success', b: 'failed' }))).toEqual({
      schedule: ['d', 'os', 'of'],
      skip: ['f'],
      upstreamFailed: ['s'],
      expand: [],
    });
    expect(planRun(d, st({ a: 'failed', b: 'upstream_failed' }))).toEqual({
      schedule: ['f', 'd', 'of'],
      skip: [],
      upstreamFailed: ['s', 'os'],
      expand: [],
    });
  });

  it('lists tasks upstream-first even when the spec lists them the other way round', () => {
    const d = dag(['c', ['b'], 'all_done'], ['b', ['a']], ['a']);
    expect(planRun(d, st({ a: 'failed' }))).toEqual({
      schedule: ['c'],
      skip: [],
      upstreamFailed: ['b'],
      expand: [],
    });
  });

  it('ignores states of tasks that are not in the spec', () => {
    expect(planRun(dag(['a']), st({ gone: 'failed' }))).toEqual({ ...empty, schedule: ['a'] });
  });

  it('rejects an unknown upstream, a cycle, a self-dependency and a duplicate id', () => {
    const code = expect.objectContaining({ code: 'LF_DAG_INVALID' });
    expect(() => planRun(dag(['a', ['ghost']]), new Map())).toThrow(code);
    expect(() => planRun(dag(['a', ['b']], ['b', ['a']], ['c']), new Map())).toThrow(code);
    expect(() => planRun(dag(['a', ['a']]), new Map())).toThrow(code);
    expect(() => planRun(dag(['a'], ['a']), new Map())).toThrow(code);
    expect(() => runOutcome(dag(['a', ['b']], ['b', ['a']]), new Map())).toThrow(code);
    expect(() => downstreamOf(dag(['a', ['ghost']]), 'a')).toThrow(code);
  });

  it('returns nothing for a DAG with no tasks', () => {
    expect(planRun(dag(), new Map())).toEqual(empty);
  });
});

describe('runOutcome', () => {
  it('is running while any task is not terminal (absent counts as none)', () => {
    expect(runOutcome(ETL, new Map())).toBe('running');
    expect(
      runOutcome(
        ETL,
        st({ extract: 'success', transform: 'success', load: 'success', notify: 'success' }),
      ),
    ).toBe('running');
    for (const s of TASK_INSTANCE_STATES.filter((x) => !isTerminal(x))) {
      expect(runOutcome(dag(['a'], ['b']), st({ a: 'success', b: s }))).toBe('running');
    }
  });

  it('succeeds when every leaf succeeded or was skipped', () => {
    expect(runOutcome(dag(['a'], ['b', ['a']]), st({ a: 'success', b: 'success' }))).toBe(
      'success',
    );
    expect(runOutcome(dag(['a'], ['b', ['a']]), st({ a: 'success', b: 'skipped' }))).toBe(
      'success',
    );
  });

  it('fails when some leaf failed or is upstream_failed', () => {
    expect(runOutcome(dag(['a'], ['b', ['a']]), st({ a: 'success', b: 'failed' }))).toBe('failed');
    expect(runOutcome(dag(['a'], ['b', ['a']]), st({ a: 'failed', b: 'upstream_failed' }))).toBe(
      'failed',
    );
  });

  it('applies the leaf rule: a failure absorbed by a succeeding all_done leaf does not fail the run', () => {
    const d = dag(['a'], ['cleanup', ['a'], 'all_done']);
    expect(runOutcome(d, st({ a: 'failed', cleanup: 'success' }))).toBe('success');
  });

  it('is success for a DAG with no tasks and ignores states of tasks not in the spec', () => {
    expect(runOutcome(dag(), new Map())).toBe('success');
    expect(runOutcome(dag(['a']), st({ a: 'success', gone: 'failed' }))).toBe('success');
  });
});

describe('downstreamOf', () => {
  const d = dag(
    ['a'],
    ['b', ['a']],
    ['c', ['a']],
    ['d', ['b', 'c']],
    ['e', ['d']],
    ['x'],
    ['y', ['x', 'c']],
  );

  it('returns every transitive downstream once, upstreams first, excluding the task itself', () => {
    expect(downstreamOf(d, 'a')).toEqual(['b', 'c', 'd', 'e', 'y']);
    expect(downstreamOf(d, 'c')).toEqual(['d', 'e', 'y']);
    expect(downstreamOf(d, 'x')).toEqual(['y']);
  });

  it('is empty for a leaf', () => {
    expect(downstreamOf(d, 'e')).toEqual([]);
  });

  it('orders by dependency even against spec order', () => {
    const rev = dag(['z', ['y']], ['y', ['x']], ['x']);
    expect(downstreamOf(rev, 'x')).toEqual(['y', 'z']);
  });

  it('rejects an unknown task', () => {
    expect(() => downstreamOf(d, 'nope')).toThrow(
      expect.objectContaining({ code: 'LF_TASK_NOT_FOUND' }),
    );
  });
});

// Random DAGs: task i may depend only on tasks before it, so the graph is acyclic; the spec
// order is then shuffled so the implementation cannot lean on it.
const dagArb = fc
  .integer({ min: 1, max: 12 })
  .chain((n) =>
    fc.record({
      deps: fc.tuple(
        ...Array.from({ length: n }, (_, i) =>
          i === 0
            ? fc.constant<number[]>([])
            : fc.uniqueArray(fc.integer({ min: 0, max: i - 1 }), { maxLength: 3 }),
        ),
      ),
      rules: fc.array(fc.constantFrom(...TRIGGER_RULES), { minLength: n, maxLength: n }),
      states: fc.array(fc.constantFrom(...TASK_INSTANCE_STATES), { minLength: n, maxLength: n }),
      perm: fc.shuffledSubarray(
        Array.from({ length: n }, (_, i) => i),
        { minLength: n, maxLength: n },
      ),
    }),
  )
  .map(({ deps, rules, states, perm }) => {
    const spec = dag(...perm.map((i): T => [`t${i}`, deps[i]!.map((j) => `t${j}`), rules[i]!]));
    const map = new Map<string, TaskInstanceState>(states.map((s, i) => [`t${i}`, s]));
    return { spec, states: map };
  });

describe('planRun / downstreamOf properties', () => {
  it('only moves tasks in none, into disjoint lists', () => {
    fc.assert(
      fc.property(dagArb, ({ spec, states }) => {
        const p = planRun(spec, states);
        const all = [...p.schedule, ...p.skip, ...p.upstreamFailed];
        expect(new Set(all).size).toBe(all.length);
        for (const id of all) expect(states.get(id) ?? 'none').toBe('none');
      }),
    );
  });

  it('is idempotent: after applying a plan the next tick plans nothing', () => {
    fc.assert(
      fc.property(dagArb, ({ spec, states }) => {
        const p = planRun(spec, states);
        const after = new Map(states);
        for (const id of p.schedule) after.set(id, 'scheduled');
        for (const id of p.skip) after.set(id, 'skipped');
        for (const id of p.upstreamFailed) after.set(id, 'upstream_failed');
        expect(planRun(spec, after)).toEqual(empty);
      }),
    );
  });

  it('lists a downstream only after its upstreams and never before them', () => {
    fc.assert(
      fc.property(dagArb, fc.nat(), ({ spec }, pick) => {
        const id = spec.tasks[pick % spec.tasks.length]!.task_id;
        const down = downstreamOf(spec, id);
        expect(down).not.toContain(id);
        const pos = new Map(down.map((t, i) => [t, i]));
        for (const t of spec.tasks) {
          if (!pos.has(t.task_id)) continue;
          for (const u of t.depends_on) {
            if (pos.has(u)) expect(pos.get(u)!).toBeLessThan(pos.get(t.task_id)!);
          }
          // Reached only through something that is itself downstream, or directly.
          expect(t.depends_on.some((u) => u === id || pos.has(u))).toBe(true);
        }
      }),
    );
  });

  it('reports running exactly while some task is not terminal', () => {
    fc.assert(
      fc.property(dagArb, ({ spec, states }) => {
        const allDone = spec.tasks.every((t) => isTerminal(states.get(t.task_id) ?? 'none'));
        expect(runOutcome(spec, states) === 'running').toBe(!allDone);
      }),
    );
  });
});
