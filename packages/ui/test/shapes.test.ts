import { describe, expect, it } from 'vitest';
import type { SpecTask } from '../src/api';
import { graphView, gridRows, groupNodeId, summaryState } from '../src/shapes';

const t = (task_id: string, depends_on: string[] = [], group?: string): SpecTask => ({
  task_id,
  depends_on,
  type: 'bash',
  trigger_rule: 'all_success',
  retries: 0,
  variables: [],
  connections: [],
  ...(group !== undefined ? { group } : {}),
});

const TASKS = [
  t('start'),
  t('etl.a', ['start'], 'etl'),
  t('etl.b', ['etl.a'], 'etl'),
  t('etl.inner.x', ['etl.a'], 'etl.inner'),
  t('load', ['etl.b', 'etl.inner.x']),
];
const GROUPS = [{ group_id: 'etl' }, { group_id: 'etl.inner', parent: 'etl' }];

describe('graphView: collapsed groups fold into one node', () => {
  it('attaches the edges of a collapsed group to its node, drops those inside, merges duplicates', () => {
    const view = graphView(TASKS, GROUPS, new Set(['etl']));
    expect(view.map((n) => [n.task_id, n.kind, n.depends_on])).toEqual([
      ['start', 'task', []],
      [groupNodeId('etl'), 'group', ['start']],
      ['load', 'task', [groupNodeId('etl')]],
    ]);
    expect(view[1]!.members).toEqual(['etl.a', 'etl.b', 'etl.inner.x']);
  });

  it('opens a group down to its collapsed subgroups, and shows every task with none collapsed', () => {
    const inner = graphView(TASKS, GROUPS, new Set(['etl.inner']));
    expect(inner.map((n) => n.task_id)).toEqual([
      'start',
      'etl.a',
      'etl.b',
      groupNodeId('etl.inner'),
      'load',
    ]);
    expect(inner.find((n) => n.task_id === 'load')!.depends_on).toEqual([
      'etl.b',
      groupNodeId('etl.inner'),
    ]);
    expect(graphView(TASKS, GROUPS, new Set()).map((n) => n.task_id)).toEqual(
      TASKS.map((x) => x.task_id),
    );
  });
});

describe('gridRows and summaryState', () => {
  it("lists a group row before its tasks, indents by depth, hides a collapsed group's content", () => {
    expect(
      gridRows(TASKS, GROUPS, new Set()).map((r) => `${r.depth}:${r.kind}:${r.label}`),
    ).toEqual([
      '0:task:start',
      '0:group:etl',
      '1:task:a',
      '1:task:b',
      '1:group:inner',
      '2:task:x',
      '0:task:load',
    ]);
    expect(gridRows(TASKS, GROUPS, new Set(['etl'])).map((r) => r.label)).toEqual([
      'start',
      'etl',
      'load',
    ]);
  });

  it("ranks states as Airflow's grid does", () => {
    expect(summaryState(['success', 'failed', 'running'])).toBe('failed');
    expect(summaryState(['success', 'running'])).toBe('running');
    expect(summaryState(['success', 'skipped'])).toBe('success');
    expect(summaryState([])).toBe('none');
  });
});
