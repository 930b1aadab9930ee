// @vitest-environment happy-dom
import { act } from 'react';
import { createRoot, type Root } from 'react-dom/client';
import { createMemoryRouter, RouterProvider } from 'react-router';
import { afterEach, describe, expect, it } from 'vitest';
import type { Run, TaskInstance } from '../src/api';
import { Delivery, type DeliveryRecord } from '../src/components/Delivery';
import { Gantt } from '../src/components/Gantt';
import { layout, neighbour, readingOrder } from '../src/components/Graph';
import { Grid } from '../src/components/Grid';
import { Time } from '../src/components/Time';
import { lineDiff } from '../src/diff';
import { duration } from '../src/format';
import { parseConf } from '../src/pages/Trigger';
import { GrantsForm, parseVariablesExport } from '../src/pages/Vault';
import { DeclaredSecrets } from '../src/pages/Dag';
import { SessionProvider } from '../src/session';
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import type { Spec, Whoami } from '../src/api';

(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true;

let root: Root | null = null;
let host: HTMLElement | null = null;
afterEach(() => {
  act(() => root?.unmount());
  host?.remove();
  root = null;
});

function render(element: React.ReactElement): HTMLElement {
  host = document.createElement('div');
  document.body.appendChild(host);
  const router = createMemoryRouter([{ path: '*', element }]);
  act(() => {
    root = createRoot(host as HTMLElement);
    root.render(<RouterProvider router={router} />);
  });
  return host;
}

const run = (run_id: string, state: string): Run => ({
  dag_id: 'd',
  run_id,
  dag_version: 1,
  run_type: 'manual',
  state,
  logical_date: null,
  data_interval_start: null,
  data_interval_end: null,
  conf: {},
  created_at: null,
  started_at: null,
  ended_at: null,
});
const ti = (task_id: string, state: string, try_number = 1, map_index = -1): TaskInstance => ({
  task_id,
  map_index,
  map_value: null,
  decision: null,
  try_number,
  max_tries: 3,
  state,
  queued_at: null,
  started_at: '2026-01-01T00:00:00.000Z',
  ended_at: '2026-01-01T00:01:05.000Z',
  last_heartbeat_at: null,
  retry_at: null,
  exit_code: null,
  error_message: null,
  hostname: null,
  executor: null,
});

describe('Grid', () => {
  it('draws one cell per run and task, coloured by state, with the try number when it retried', () => {
    const el = render(
      <Grid
        dagId="d"
        tasks={[{ task_id: 'a' }, { task_id: 'b' }]}
        runs={[run('r1', 'success'), run('r2', 'running')]}
        instances={{ r1: [ti('a', 'success'), ti('b', 'success')], r2: [ti('a', 'failed', 2)] }}
      />,
    );
    const cells = el.querySelectorAll('td a');
    expect(cells).toHaveLength(4);
    const a2 = el.querySelector('[data-testid="cell-r2-a"]');
    expect(a2?.getAttribute('data-state')).toBe('failed');
    expect(a2?.className).toContain('state-failed');
    expect(a2?.textContent).toBe('2');
    expect(a2?.getAttribute('title')).toContain('1m 5s');
    expect(a2?.getAttribute('href')).toBe('/dags/d/runs/r2/tasks/a');
    // A task without an instance in a run is drawn empty, not guessed.
    expect(el.querySelector('[data-testid="cell-r2-b"]')?.getAttribute('data-state')).toBe('none');
    expect(el.querySelector('[data-testid="cell-r1-a"]')?.textContent).toBe('');
  });

  it('says what to do when there are no runs', () => {
    const el = render(<Grid dagId="d" tasks={[{ task_id: 'a' }]} runs={[]} instances={{}} />);
    expect(el.textContent).toContain('No runs yet');
  });
});

describe('Grid: task groups and mapped tasks (issue 41)', () => {
  const tasks = [
    { task_id: 'start' },
    { task_id: 'etl.pull', group: 'etl' },
    { task_id: 'etl.inner.check', group: 'etl.inner' },
    { task_id: 'process', expand: [] },
  ];
  const groups = [{ group_id: 'etl' }, { group_id: 'etl.inner', parent: 'etl' }];
  const instances = {
    r1: [
      ti('start', 'success'),
      ti('etl.pull', 'success'),
      ti('etl.inner.check', 'failed'),
      ti('process', 'success', 1, 0),
      ti('process', 'running', 1, 1),
      ti('process', 'success', 2, 2),
    ],
  };

  it("shows a group collapsed as one row whose cell is its tasks' state, and opens it on click", () => {
    const el = render(
      <Grid
        dagId="d"
        tasks={tasks}
        groups={groups}
        runs={[run('r1', 'running')]}
        instances={instances}
      />,
    );
    const rows = () => [...el.querySelectorAll('tbody th')].map((th) => th.textContent?.trim());
    expect(rows()).toEqual(['start', '▸ etl (2 tasks)', '▸ process [mapped]']);
    const group = el.querySelector('[data-testid="cell-r1-group:etl"]');
    // failed outranks success, as Airflow's grid ranks a group's states
    expect(group?.getAttribute('data-state')).toBe('failed');
    expect(group?.getAttribute('title')).toContain('1 success, 1 failed');
    const open = el.querySelector<HTMLButtonElement>('button[aria-expanded="false"]')!;
    act(() => open.click());
    expect(rows()).toEqual([
      'start',
      '▾ etl (2 tasks)',
      'pull',
      '▸ inner (1 tasks)',
      '▸ process [mapped]',
    ]);
  });

  it("shows a mapped task's map indexes: their count and states, then one row per index", () => {
    const el = render(
      <Grid
        dagId="d"
        tasks={tasks}
        groups={groups}
        runs={[run('r1', 'running')]}
        instances={instances}
      />,
    );
    const cell = el.querySelector('[data-testid="cell-r1-process"]');
    expect(cell?.textContent).toBe('3');
    expect(cell?.getAttribute('data-state')).toBe('running');
    expect(cell?.getAttribute('title')).toContain('3 map indexes (2 success, 1 running)');
    const toggle = [...el.querySelectorAll<HTMLButtonElement>('button')].find((b) =>
      b.textContent?.includes('process'),
    )!;
    act(() => toggle.click());
    const idx2 = el.querySelector('[data-testid="cell-r1-process[2]"]');
    expect(idx2?.getAttribute('href')).toBe('/dags/d/runs/r1/tasks/process?map_index=2');
    expect(idx2?.textContent).toBe('2');
    expect(el.querySelector('[data-testid="cell-r1-process[1]"]')?.getAttribute('data-state')).toBe(
      'running',
    );
  });
});

describe('Time', () => {
  it('shows local time with the UTC instant on hover', () => {
    const el = render(<Time iso="2026-03-04T05:06:07.000Z" />);
    const t = el.querySelector('time');
    expect(t?.getAttribute('title')).toBe('2026-03-04T05:06:07.000Z (UTC)');
    expect(t?.getAttribute('datetime')).toBe('2026-03-04T05:06:07.000Z');
  });
});

describe('trigger conf editor', () => {
  it('accepts a JSON object (or nothing) and explains anything else', () => {
    expect(parseConf('')).toEqual({ conf: {} });
    expect(parseConf('{"multiplier": 2}')).toEqual({ conf: { multiplier: 2 } });
    const notObject = parseConf('[1]');
    expect('error' in notObject && notObject.error).toContain('JSON object');
    const broken = parseConf('{nope');
    expect('error' in broken && broken.error).toContain('not valid JSON');
  });
});

describe('graph layout and durations', () => {
  it('puts a task to the right of what it depends on', () => {
    const t = (task_id: string, depends_on: string[] = []) => ({
      task_id,
      depends_on,
      type: 'bash',
      trigger_rule: 'all_success',
      retries: 0,
      variables: [],
      connections: [],
    });
    const pos = layout([t('extract'), t('transform', ['extract']), t('load', ['transform'])]);
    expect(pos.extract!.x).toBeLessThan(pos.transform!.x);
    expect(pos.transform!.x).toBeLessThan(pos.load!.x);
  });

  it('formats durations', () => {
    expect(duration('2026-01-01T00:00:00Z', '2026-01-01T00:00:09Z')).toBe('9s');
    expect(duration('2026-01-01T00:00:00Z', '2026-01-01T02:03:00Z')).toBe('2h 3m');
    expect(duration(null, null)).toBe('—');
  });
});

describe('version diff', () => {
  it('keeps common lines and marks removed and added ones in order', () => {
    expect(lineDiff(['a', 'b', 'c'], ['a', 'x', 'c', 'd'])).toEqual([
      { op: ' ', text: 'a' },
      { op: '-', text: 'b' },
      { op: '+', text: 'x' },
      { op: ' ', text: 'c' },
      { op: '+', text: 'd' },
    ]);
    expect(lineDiff(['same'], ['same']).every((d) => d.op === ' ')).toBe(true);
  });
});

describe('Gantt', () => {
  it('places each started task on one time axis and leaves out tasks not started', () => {
    const a = {
      ...ti('a', 'success'),
      started_at: '2026-01-01T00:00:00.000Z',
      ended_at: '2026-01-01T00:00:10.000Z',
    };
    const b = { ...ti('b', 'running'), started_at: '2026-01-01T00:00:10.000Z', ended_at: null };
    const c = { ...ti('c', 'none'), started_at: null, ended_at: null };
    const now = Date.parse('2026-01-01T00:00:20.000Z');
    const el = render(<Gantt taskInstances={[a, b, c]} hrefOf={(t) => `/t/${t}`} now={now} />);
    const barA = el.querySelector<HTMLElement>('[data-testid="gantt-a"]');
    const barB = el.querySelector<HTMLElement>('[data-testid="gantt-b"]');
    expect(barA?.style.left).toBe('0%');
    expect(barA?.style.width).toBe('50%');
    // a running task's bar ends at "now"
    expect(barB?.style.left).toBe('50%');
    expect(barB?.style.width).toBe('50%');
    expect(barB?.getAttribute('aria-label')).toBe('b: running, 10s');
    expect(el.querySelector('[data-testid="gantt-c"]')).toBeNull();
  });

  it('says what to expect when no task has started', () => {
    const el = render(
      <Gantt taskInstances={[{ ...ti('a', 'none'), started_at: null }]} hrefOf={() => '/'} />,
    );
    expect(el.textContent).toContain('No task has started yet');
  });
});

describe('Delivery', () => {
  const record: DeliveryRecord = {
    try_number: 1,
    scoping_mode: 'enforce',
    liveness_mode: 'observe',
    registered_at: '2026-01-01T00:00:00.000Z',
    variables_delivered: ['api_key'],
    connections_delivered: [],
    variables_refusal: null,
    connections_refusal: 'LF_SECRET_NOT_DECLARED',
    renewals: 2,
    last_renewed_at: '2026-01-01T00:05:00.000Z',
    renewal_stopped: 'attempt ended',
    credential_expires_at: '2026-01-01T00:10:00.000Z',
    undeclared_reads: null,
  };
  it('shows the names, modes, refusals, renewals and whether the credential is alive', () => {
    const before = render(<Delivery record={record} now={Date.parse('2026-01-01T00:09:00Z')} />);
    expect(before.textContent).toContain('enforce');
    expect(before.querySelector('[data-testid="delivered-variables"]')?.textContent).toBe(
      'api_key',
    );
    expect(before.querySelector('[data-testid="delivered-connections"]')?.textContent).toContain(
      'none',
    );
    expect(before.textContent).toContain('Refused: LF_SECRET_NOT_DECLARED');
    expect(before.textContent).toContain('stopped: attempt ended');
    expect(before.querySelector('[data-testid="credential-state"]')?.textContent).toMatch(/^alive/);
    act(() => root?.unmount());
    const after = render(<Delivery record={record} now={Date.parse('2026-01-01T00:11:00Z')} />);
    expect(after.querySelector('[data-testid="credential-state"]')?.textContent).toMatch(
      /^expired/,
    );
  });
});

describe('parseVariablesExport', () => {
  it('reads an airflow variables export and names what is wrong otherwise', () => {
    expect(parseVariablesExport('{"a": "x", "n": 5, "o": {"k": 1}}')).toEqual([
      { key: 'a', value: 'x' },
      { key: 'n', value: '5' },
      { key: 'o', value: '{"k":1}' },
    ]);
    expect(parseVariablesExport('[1]')).toMatch(/expected one JSON object/);
    expect(parseVariablesExport('{')).toMatch(/^not JSON/);
  });
});

describe('graph keyboard moves', () => {
  // a → b, a → c, b → d, c → d: two columns in the middle
  const t = (task_id: string, depends_on: string[] = []) => ({
    task_id,
    type: 'command',
    depends_on,
    trigger_rule: 'all_success',
    retries: 0,
    variables: [],
    connections: [],
  });
  const tasks = [t('d', ['b', 'c']), t('b', ['a']), t('a'), t('c', ['a'])];
  const pos = layout(tasks);

  it('Tab order reads the picture left to right, then top to bottom', () => {
    const order = readingOrder(tasks, pos);
    expect(order[0]).toBe('a');
    expect(order[3]).toBe('d');
    expect(order.slice(1, 3).sort()).toEqual(['b', 'c']);
  });

  it('right goes downstream, left upstream, up and down within a column, Home and End to the ends', () => {
    const [upper, lower] = ['b', 'c'].sort((x, y) => pos[x]!.y - pos[y]!.y) as [string, string];
    expect(['b', 'c']).toContain(neighbour(tasks, pos, 'a', 'ArrowRight'));
    expect(neighbour(tasks, pos, upper, 'ArrowRight')).toBe('d');
    expect(neighbour(tasks, pos, upper, 'ArrowLeft')).toBe('a');
    expect(neighbour(tasks, pos, upper, 'ArrowDown')).toBe(lower);
    expect(neighbour(tasks, pos, lower, 'ArrowUp')).toBe(upper);
    expect(neighbour(tasks, pos, lower, 'ArrowDown')).toBeNull();
    expect(neighbour(tasks, pos, 'a', 'ArrowLeft')).toBeNull();
    expect(neighbour(tasks, pos, 'd', 'ArrowRight')).toBeNull();
    expect(neighbour(tasks, pos, upper, 'Home')).toBe('a');
    expect(neighbour(tasks, pos, 'a', 'End')).toBe('d');
  });
});

describe('DeclaredSecrets (issue 34: effective declarations and grants)', () => {
  const spec: Spec = {
    dag_id: 'etl',
    schedule: null,
    schedule_timezone: 'UTC',
    // DAG level: every task without a list of its own receives these
    variables: ['region'],
    connections: ['warehouse'],
    tasks: [
      {
        task_id: 'a',
        type: 'bash',
        depends_on: [],
        trigger_rule: 'all_success',
        retries: 0,
        variables: [],
        connections: [],
      },
      {
        task_id: 'b',
        type: 'bash',
        depends_on: [],
        trigger_rule: 'all_success',
        retries: 0,
        variables: ['api_token'],
        connections: [],
      },
    ],
  };
  const GRANTS: Record<string, unknown> = {
    '/api/v1/variables/region/grants': {
      name: 'region',
      grants: null,
      declared_by: [{ dag_id: 'etl', granted: true }],
    },
    '/api/v1/variables/api_token/grants': {
      name: 'api_token',
      grants: ['report_*'],
      declared_by: [{ dag_id: 'etl', granted: false }],
    },
    '/api/v1/connections/warehouse/grants': {
      name: 'warehouse',
      grants: ['etl', 'etl_*'],
      declared_by: [{ dag_id: 'etl', granted: true }],
    },
  };

  it('shows what each task is delivered and from which list, and each declared secret’s grants', async () => {
    const realFetch = globalThis.fetch;
    globalThis.fetch = ((url: string) =>
      Promise.resolve(
        new Response(JSON.stringify(GRANTS[url] ?? {}), {
          status: GRANTS[url] ? 200 : 404,
          headers: { 'content-type': 'application/json' },
        }),
      )) as typeof fetch;
    try {
      const me = { permissions: ['variables:read', 'connections:read'] } as unknown as Whoami;
      const qc = new QueryClient({ defaultOptions: { queries: { retry: false } } });
      const el = render(
        <QueryClientProvider client={qc}>
          <SessionProvider me={me}>
            <DeclaredSecrets dagId="etl" spec={spec} />
          </SessionProvider>
        </QueryClientProvider>,
      );
      const rows = () =>
        [...el.querySelectorAll('[data-testid="declared-secrets"] tbody tr')].map((r) =>
          [...r.children].map((c) => c.textContent),
        );
      expect(rows()).toEqual([
        ['a', 'all_success', "region (the DAG's list)", "warehouse (the DAG's list)"],
        ['b', 'all_success', "api_token (the task's own list)", "warehouse (the DAG's list)"],
      ]);
      await act(async () => {
        for (let i = 0; i < 20; i++) await new Promise((r) => setTimeout(r, 5));
      });
      const grants = [...el.querySelectorAll('[data-testid="declared-grants"] tbody tr')].map((r) =>
        [...r.children].map((c) => c.textContent),
      );
      expect(grants).toEqual([
        ['region', 'Variable', 'every DAG', 'granted'],
        [
          'api_token',
          'Variable',
          'report_*',
          'not granted: its tasks fail with LF_SECRET_NOT_GRANTED',
        ],
        ['warehouse', 'Connection', 'etl, etl_*', 'granted'],
      ]);
    } finally {
      globalThis.fetch = realFetch;
    }
  });
});

describe('GrantsForm (issue 34): the narrowing preview before saving', () => {
  it('lists the registered DAGs that would lose the secret before it can be saved, then saves exactly that', async () => {
    const realFetch = globalThis.fetch;
    const sent: { method: string; body: unknown }[] = [];
    globalThis.fetch = ((url: string, init: RequestInit) => {
      const body = JSON.parse(init.body as string) as { grants: string[]; dry_run?: boolean };
      sent.push({ method: String(init.method), body });
      expect(url).toBe('/api/v1/variables/g_token/grants');
      return Promise.resolve(
        new Response(
          JSON.stringify({
            name: 'g_token',
            grants: body.grants,
            previous: null,
            applied: body.dry_run !== true,
            losing: ['report'],
            gaining: [],
            declared_by: [],
          }),
          { status: 200, headers: { 'content-type': 'application/json' } },
        ),
      );
    }) as typeof fetch;
    let done = false;
    try {
      const qc = new QueryClient();
      const el = render(
        <QueryClientProvider client={qc}>
          <GrantsForm
            kind="variables"
            name="g_token"
            current={null}
            onDone={() => {
              done = true;
            }}
          />
        </QueryClientProvider>,
      );
      const input = el.querySelector('input[placeholder]') as HTMLInputElement;
      const button = () => el.querySelector('button[type="submit"]') as HTMLButtonElement;
      const settle = () =>
        act(async () => {
          for (let i = 0; i < 10; i++) await new Promise((r) => setTimeout(r, 5));
        });
      act(() => {
        // React tracks the value through the prototype's setter: set it as a user's typing does
        Reflect.set(HTMLInputElement.prototype, 'value', 'etl_*', input);
        input.dispatchEvent(new Event('input', { bubbles: true }));
      });
      expect(button().textContent).toBe('Preview');
      act(() => button().click());
      await settle();
      expect(sent).toEqual([{ method: 'PUT', body: { grants: ['etl_*'], dry_run: true } }]);
      expect(el.querySelector('[data-testid="grants-preview"]')?.textContent).toContain(
        'Registered DAGs that would lose it (their tasks then fail with LF_SECRET_NOT_GRANTED): report',
      );
      expect(done).toBe(false);
      expect(button().textContent).toBe('Save grants');
      act(() => button().click());
      await settle();
      expect(sent[1]).toEqual({ method: 'PUT', body: { grants: ['etl_*'] } });
      expect(done).toBe(true);
    } finally {
      globalThis.fetch = realFetch;
    }
  });
});
