import { randomUUID } from 'node:crypto';
import type { DagSpec, TaskInstanceState } from '@leoflow/core';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LogLineRow, NewRun, Store, TaskInstanceRow } from '../../src/store/index.js';
import { spec as buildSpec, task } from '../support/spec-builders.js';
import { registerVaultStoreCases } from './vault-store.cases.js';
import { registerWarmPoolMemberCases } from './warm-pool-members.cases.js';
import { registerTaskMappingCases } from './task-mapping.cases.js';

/**
 * The one storage suite. Each dialect's test file supplies `open`, which must return a new
 * Store over the same database every time it is called (so reopen-keeps-data is testable).
 * Tests share one database per file and isolate themselves with fresh tenant ids; assertions
 * on cross-tenant methods filter to the test's own tenants.
 */
export interface StoreSuiteHarness {
  open(): Promise<Store>;
}

// Past 2^31 on purpose: epoch ms must survive the bigint columns on both dialects.
const T0 = 1_700_000_000_000;

export function registerStoreSuite(harness: StoreSuiteHarness): void {
  let store: Store;

  beforeAll(async () => {
    store = await harness.open();
    await store.migrate();
  });
  afterAll(async () => {
    await store?.close();
  });

  async function newTenant(label = 't'): Promise<string> {
    const id = `${label}-${randomUUID()}`;
    await store.ensureTenant(id, `Tenant ${label}`, T0);
    return id;
  }

  /** A chain of bash tasks with every field set to a non-default, so round trips are checked. */
  function spec(
    dag_id: string,
    taskIds: string[] = ['extract', 'load'],
    description = '',
  ): DagSpec {
    return buildSpec({
      dag_id,
      description,
      owner: 'data-eng',
      tags: ['etl', 'ünïcode'],
      schedule: '@daily',
      start_date: '2024-01-01T00:00:00Z',
      max_active_runs: 1,
      defaults: { retries: 1, retry_delay_seconds: 300, execution_timeout_seconds: null },
      params: { nested: { list: [1, 'two', null], flag: true } },
      variables: ['api_key'],
      connections: ['warehouse'],
      tasks: taskIds.map((task_id, i) =>
        task(task_id, {
          depends_on: i === 0 ? [] : [taskIds[i - 1] ?? ''],
          retries: 1,
          env: { MODE: 'test' },
        }),
      ),
    });
  }

  function newRun(tenant_id: string, dag_id: string, over: Partial<NewRun> = {}): NewRun {
    return {
      tenant_id,
      dag_id,
      run_id: `manual__${randomUUID()}`,
      run_type: 'manual',
      dag_version: 1,
      logical_date: null,
      data_interval_start: null,
      data_interval_end: null,
      conf: {},
      tasks: [
        { task_id: 'extract', max_tries: 2 },
        { task_id: 'load', max_tries: 1 },
      ],
      now: T0,
      ...over,
    };
  }

  /** A tenant, a registered DAG and one run with two task instances. */
  async function fixture(label = 'fx') {
    const tenant_id = await newTenant(label);
    const dag_id = 'etl';
    await store.putDagVersion(tenant_id, spec(dag_id), 'hash-1', T0);
    const run = await store.createRun(newRun(tenant_id, dag_id));
    if (run === undefined) throw new Error('fixture run not created');
    const tis = await store.listTaskInstances(run.id);
    const ti = (task_id: string): TaskInstanceRow => {
      const found = tis.find((t) => t.task_id === task_id);
      if (found === undefined) throw new Error(`no task instance ${task_id}`);
      return found;
    };
    return { tenant_id, dag_id, run, extract: ti('extract'), load: ti('load') };
  }

  async function ti(id: string): Promise<TaskInstanceRow> {
    const row = await store.getTaskInstanceById(id);
    if (row === undefined) throw new Error(`task instance ${id} vanished`);
    return row;
  }

  describe('migrations and lifecycle', () => {
    it('migrate() a second time is a no-op that keeps data', async () => {
      const tenant_id = await newTenant();
      await store.putDagVersion(tenant_id, spec('d'), 'h', T0);
      await store.migrate();
      await store.migrate();
      expect((await store.getDag(tenant_id, 'd'))?.current_version).toBe(1);
    });

    it('a store reopened over the same database sees everything written before close', async () => {
      const { tenant_id, run, extract } = await fixture('reopen');
      await store.updateTaskInstance(
        extract.id,
        { states: ['none'] },
        { state: 'queued', terminate_requested: true, queued_at: T0 + 5 },
        T0 + 5,
      );
      await store.putXCom({
        tenant_id,
        dag_run_id: run.id,
        task_id: 'extract',
        key: 'k',
        value: new Uint8Array([0, 1, 255]),
        content_type: 'application/octet-stream',
        created_at: T0,
      });
      await store.close();

      store = await harness.open();
      await store.migrate();
      expect(await store.getRunById(run.id)).toEqual(run);
      const reread = await ti(extract.id);
      expect(reread).toMatchObject({
        state: 'queued',
        terminate_requested: true,
        queued_at: T0 + 5,
      });
      expect((await store.getXCom(run.id, 'extract', 'k'))?.value).toEqual(
        new Uint8Array([0, 1, 255]),
      );
    });

    it('close() twice is harmless', async () => {
      const extra = await harness.open();
      await extra.migrate();
      await extra.close();
      await expect(extra.close()).resolves.toBeUndefined();
    });

    it('reports its dialect', () => {
      expect(['sqlite', 'postgres']).toContain(store.dialect);
    });
  });

  describe('tenants', () => {
    it('ensureTenant is idempotent', async () => {
      const id = `tenant-${randomUUID()}`;
      await store.ensureTenant(id, 'A', T0);
      await store.ensureTenant(id, 'A again', T0 + 1);
      await expect(store.putDagVersion(id, spec('d'), 'h', T0)).resolves.toEqual({
        version: 1,
        created: true,
      });
    });

    it('rows for an unknown tenant are rejected by the foreign key', async () => {
      await expect(
        store.putDagVersion(`ghost-${randomUUID()}`, spec('d'), 'h', T0),
      ).rejects.toThrow();
    });
  });

  describe('dags and versions', () => {
    it('a DAG registered for the first time starts paused when asked; a later version keeps its state', async () => {
      const t = await newTenant();
      await store.putDagVersion(t, spec('p', ['a']), 'h1', T0, { pausedAtCreation: true });
      expect((await store.getDag(t, 'p'))?.is_paused).toBe(true);
      expect((await store.listSchedulableDags()).some((d) => d.tenant_id === t)).toBe(false);
      await store.setDagPaused(t, 'p', false, T0 + 1);
      await store.putDagVersion(t, spec('p', ['a', 'b']), 'h2', T0 + 2, { pausedAtCreation: true });
      expect((await store.getDag(t, 'p'))?.is_paused).toBe(false);
      await store.putDagVersion(t, spec('u', ['a']), 'h', T0);
      expect((await store.getDag(t, 'u'))?.is_paused).toBe(false);
    });

    it('a folder DAG remembers its file; inactive ones are not scheduled, and registering reactivates', async () => {
      const t = await newTenant();
      await store.putDagVersion(t, spec('f', ['a']), 'h1', T0, { sourceFile: 'f/leoflow.yaml' });
      await store.putDagVersion(t, spec('pushed', ['a']), 'h1', T0, { sourceFile: null });
      expect(await store.listFolderDags(t)).toEqual([
        { dag_id: 'f', source_file: 'f/leoflow.yaml', is_active: true },
      ]);
      expect(await store.setDagActive(t, 'f', false, T0 + 1)).toBe(true);
      expect(await store.setDagActive(t, 'f', false, T0 + 2)).toBe(false);
      const schedulable = (await store.listSchedulableDags()).filter((d) => d.tenant_id === t);
      expect(schedulable.map((d) => d.dag_id)).toEqual(['pushed']);
      // the same spec again (no new version) still makes it active; a push clears the file
      await store.putDagVersion(t, spec('f', ['a']), 'h1', T0 + 3, {
        sourceFile: 'f/leoflow.yaml',
      });
      expect((await store.getDag(t, 'f'))?.is_active).toBe(true);
      await store.putDagVersion(t, spec('f', ['a']), 'h1', T0 + 4, { sourceFile: null });
      expect((await store.getDag(t, 'f'))?.source_file).toBeNull();
    });

    it('import errors: replaced as a set per tenant, first_seen_at kept while unchanged', async () => {
      const t = await newTenant();
      const other = await newTenant();
      const diag = (code: string) => ({
        code,
        message: 'm',
        file: 'x/leoflow.yaml',
        line: 3,
        column: 5,
        path: 'tasks[0]',
        hint: 'h',
      });
      await store.setDagImportErrors(
        t,
        [
          { file: 'x/leoflow.yaml', dag_id: null, diagnostics: [diag('LF_YAML_SYNTAX')] },
          { file: 'y/leoflow.yaml', dag_id: 'y', diagnostics: [diag('LF_DAG_CYCLE')] },
        ],
        T0,
      );
      await store.setDagImportErrors(other, [], T0);
      await store.setDagImportErrors(
        t,
        [
          { file: 'x/leoflow.yaml', dag_id: null, diagnostics: [diag('LF_YAML_SYNTAX')] },
          { file: 'z/leoflow.yaml', dag_id: 'z', diagnostics: [diag('LF_DAG_CYCLE')] },
        ],
        T0 + 5,
      );
      const rows = await store.listDagImportErrors(t);
      expect(rows.map((r) => [r.file, r.first_seen_at, r.updated_at])).toEqual([
        ['x/leoflow.yaml', T0, T0],
        ['z/leoflow.yaml', T0 + 5, T0 + 5],
      ]);
      expect(rows[0]?.diagnostics).toEqual([diag('LF_YAML_SYNTAX')]);
      expect(await store.listDagImportErrors(other)).toEqual([]);
      await store.setDagImportErrors(t, [], T0 + 6);
      expect(await store.listDagImportErrors(t)).toEqual([]);
    });

    it('numbers versions 1,2,3 and a same-hash push is a no-op', async () => {
      const t = await newTenant();
      expect(await store.putDagVersion(t, spec('d', ['a']), 'h1', T0)).toEqual({
        version: 1,
        created: true,
      });
      expect(await store.putDagVersion(t, spec('d', ['a']), 'h1', T0 + 1)).toEqual({
        version: 1,
        created: false,
      });
      expect(await store.putDagVersion(t, spec('d', ['a', 'b']), 'h2', T0 + 2)).toEqual({
        version: 2,
        created: true,
      });
      // Compared with the current version only: going back to an older spec is a new version.
      expect(await store.putDagVersion(t, spec('d', ['a']), 'h1', T0 + 3)).toEqual({
        version: 3,
        created: true,
      });

      expect(await store.getDag(t, 'd')).toEqual({
        tenant_id: t,
        dag_id: 'd',
        current_version: 3,
        is_paused: false,
        last_scheduled_logical_date: null,
        created_at: T0,
        updated_at: T0 + 3,
        source_file: null,
        is_active: true,
      });
      expect(await store.listDagVersions(t, 'd')).toEqual([
        { tenant_id: t, dag_id: 'd', version: 1, spec_hash: 'h1', created_at: T0 },
        { tenant_id: t, dag_id: 'd', version: 2, spec_hash: 'h2', created_at: T0 + 2 },
        { tenant_id: t, dag_id: 'd', version: 3, spec_hash: 'h1', created_at: T0 + 3 },
      ]);
    });

    it('getDagVersion returns the spec parsed back into an object', async () => {
      const t = await newTenant();
      const s = spec('d', ['a', 'b', 'c'], 'line one\nline "two"');
      await store.putDagVersion(t, s, 'h', T0);
      expect(await store.getDagVersion(t, 'd', 1)).toEqual({
        tenant_id: t,
        dag_id: 'd',
        version: 1,
        spec: s,
        spec_hash: 'h',
        created_at: T0,
      });
      expect(await store.getDagVersion(t, 'd', 2)).toBeUndefined();
      expect(await store.getDag(t, 'nope')).toBeUndefined();
    });

    // Several rounds, each on a brand-new DAG: the first pushes of a DAG are the racy case
    // (there is no dags row to lock yet), and one round alone can pass by luck.
    it('concurrent pushes of different specs get distinct consecutive versions', async () => {
      const t = await newTenant();
      const n = 8;
      for (let round = 0; round < 5; round++) {
        const dag = `race-${round}`;
        const results = await Promise.all(
          Array.from({ length: n }, (_, i) =>
            store.putDagVersion(t, spec(dag, [`t${i}`]), `h${i}`, T0 + i),
          ),
        );
        expect(results.every((r) => r.created)).toBe(true);
        expect(results.map((r) => r.version).sort((a, b) => a - b)).toEqual(
          Array.from({ length: n }, (_, i) => i + 1),
        );
        expect((await store.getDag(t, dag))?.current_version).toBe(n);
        expect(await store.listDagVersions(t, dag)).toHaveLength(n);
      }
    });

    it('concurrent pushes of the same spec create exactly one version', async () => {
      const t = await newTenant();
      for (let round = 0; round < 5; round++) {
        const dag = `same-${round}`;
        const results = await Promise.all(
          Array.from({ length: 10 }, () => store.putDagVersion(t, spec(dag), 'h', T0)),
        );
        expect(results.filter((r) => r.created)).toHaveLength(1);
        expect(new Set(results.map((r) => r.version))).toEqual(new Set([1]));
        expect(await store.listDagVersions(t, dag)).toHaveLength(1);
      }
    });

    it('setDagPaused toggles is_paused and drives listSchedulableDags', async () => {
      const t = await newTenant();
      await store.putDagVersion(t, spec('a'), 'h', T0);
      await store.putDagVersion(t, spec('b'), 'h', T0);
      const mine = async () =>
        (await store.listSchedulableDags()).filter((d) => d.tenant_id === t).map((d) => d.dag_id);
      expect(await mine()).toEqual(['a', 'b']);

      expect(await store.setDagPaused(t, 'a', true, T0 + 10)).toBe(true);
      expect(await store.getDag(t, 'a')).toMatchObject({ is_paused: true, updated_at: T0 + 10 });
      expect(await mine()).toEqual(['b']);

      expect(await store.setDagPaused(t, 'a', false, T0 + 20)).toBe(true);
      expect((await store.getDag(t, 'a'))?.is_paused).toBe(false);
      expect(await mine()).toEqual(['a', 'b']);

      expect(await store.setDagPaused(t, 'missing', true, T0)).toBe(false);
    });

    it('a new version keeps the pause flag and the planner cursor', async () => {
      const t = await newTenant();
      await store.putDagVersion(t, spec('d'), 'h1', T0);
      await store.setDagPaused(t, 'd', true, T0);
      await store.createRun(
        newRun(t, 'd', { run_type: 'scheduled', run_id: 'scheduled__1', logical_date: T0 }),
      );
      await store.putDagVersion(t, spec('d', ['x']), 'h2', T0 + 1);
      expect(await store.getDag(t, 'd')).toMatchObject({
        current_version: 2,
        is_paused: true,
        last_scheduled_logical_date: T0,
        created_at: T0,
      });
    });

    it('listDags pages in dag_id order', async () => {
      const t = await newTenant();
      for (const d of ['c', 'a', 'e', 'b', 'd']) await store.putDagVersion(t, spec(d), 'h', T0);
      const ids = async (limit: number, offset: number) =>
        (await store.listDags(t, { limit, offset })).map((d) => d.dag_id);
      expect(await ids(2, 0)).toEqual(['a', 'b']);
      expect(await ids(2, 2)).toEqual(['c', 'd']);
      expect(await ids(2, 4)).toEqual(['e']);
      expect(await ids(10, 5)).toEqual([]);
    });
  });

  describe('runs', () => {
    it('createRun stores the run and one try-1 task instance per task in state none', async () => {
      const t = await newTenant();
      await store.putDagVersion(t, spec('d'), 'h', T0);
      const conf = { date: '2024-01-01', deep: { n: 1, arr: [true, null] }, emoji: '🚀' };
      const run = await store.createRun(
        newRun(t, 'd', {
          run_id: 'manual__one',
          conf,
          logical_date: T0 - 1000,
          data_interval_start: T0 - 2000,
          data_interval_end: T0 - 1000,
        }),
      );
      expect(run).toEqual({
        id: expect.any(String),
        tenant_id: t,
        dag_id: 'd',
        run_id: 'manual__one',
        dag_version: 1,
        run_type: 'manual',
        state: 'queued',
        logical_date: T0 - 1000,
        data_interval_start: T0 - 2000,
        data_interval_end: T0 - 1000,
        conf,
        created_at: T0,
        started_at: null,
        ended_at: null,
      });
      if (run === undefined) return;
      expect(await store.getRunById(run.id)).toEqual(run);
      expect(await store.getRun(t, 'd', 'manual__one')).toEqual(run);

      const tis = await store.listTaskInstances(run.id);
      expect(tis.map((x) => x.task_id)).toEqual(['extract', 'load']);
      expect(tis[0]).toEqual({
        id: expect.any(String),
        tenant_id: t,
        dag_run_id: run.id,
        dag_id: 'd',
        task_id: 'extract',
        map_index: -1,
        map_value: null,
        decision: null,
        try_number: 1,
        max_tries: 2,
        state: 'none',
        queued_at: null,
        started_at: null,
        ended_at: null,
        last_heartbeat_at: null,
        retry_at: null,
        exit_code: null,
        error_message: null,
        hostname: null,
        pid: null,
        terminate_requested: false,
        updated_at: T0,
        dispatch_gen: 0,
        executor: null,
      });
      const first = tis[0];
      if (first === undefined) return;
      expect(await store.getTaskInstance(run.id, 'extract')).toEqual(first);
      expect(await store.getTaskInstanceById(first.id)).toEqual(first);
      expect(await store.getTaskInstance(run.id, 'nope')).toBeUndefined();
      expect(await store.getRunById(randomUUID())).toBeUndefined();
    });

    it('createRun is idempotent on (tenant, dag_id, run_id)', async () => {
      const t = await newTenant();
      await store.putDagVersion(t, spec('d'), 'h', T0);
      const first = await store.createRun(newRun(t, 'd', { run_id: 'r1' }));
      expect(first).toBeDefined();
      const again = await store.createRun(
        newRun(t, 'd', { run_id: 'r1', tasks: [{ task_id: 'other', max_tries: 1 }] }),
      );
      expect(again).toBeUndefined();
      expect(await store.listRuns(t, {}, { limit: 10, offset: 0 })).toHaveLength(1);
      if (first === undefined) return;
      expect((await store.listTaskInstances(first.id)).map((x) => x.task_id)).toEqual([
        'extract',
        'load',
      ]);
    });

    it('concurrent createRun calls with one run_id create exactly one run', async () => {
      const t = await newTenant();
      await store.putDagVersion(t, spec('d'), 'h', T0);
      for (let round = 1; round <= 5; round++) {
        const ld = T0 + round * 86_400_000;
        const results = await Promise.all(
          Array.from({ length: 10 }, () =>
            store.createRun(
              newRun(t, 'd', { run_id: `dup-${round}`, run_type: 'scheduled', logical_date: ld }),
            ),
          ),
        );
        expect(results.filter((r) => r !== undefined)).toHaveLength(1);
        const run = await store.getRun(t, 'd', `dup-${round}`);
        expect(await store.listTaskInstances(run?.id ?? '')).toHaveLength(2);
        expect((await store.getDag(t, 'd'))?.last_scheduled_logical_date).toBe(ld);
      }
      expect(await store.listRuns(t, {}, { limit: 10, offset: 0 })).toHaveLength(5);
    });

    it('a run with a duplicate task_id fails as a whole instead of being treated as a duplicate run', async () => {
      const t = await newTenant();
      await store.putDagVersion(t, spec('d'), 'h', T0);
      await expect(
        store.createRun(
          newRun(t, 'd', {
            run_id: 'bad',
            tasks: [
              { task_id: 'x', max_tries: 1 },
              { task_id: 'x', max_tries: 1 },
            ],
          }),
        ),
      ).rejects.toThrow();
      expect(await store.getRun(t, 'd', 'bad')).toBeUndefined();
    });

    it('creates many task instances in one run', async () => {
      const t = await newTenant();
      await store.putDagVersion(t, spec('wide'), 'h', T0);
      const tasks = Array.from({ length: 1234 }, (_, i) => ({
        task_id: `task_${String(i).padStart(4, '0')}`,
        max_tries: 1,
      }));
      const run = await store.createRun(newRun(t, 'wide', { tasks }));
      expect(run).toBeDefined();
      const tis = await store.listTaskInstances(run?.id ?? '');
      expect(tis).toHaveLength(1234);
      expect(await store.countTaskInstancesInStates(t, 'wide', ['none'])).toBe(1234);
    });

    it('listTaskInstancesOfRuns returns the task instances of exactly the given runs, in one call', async () => {
      const t = await newTenant();
      await store.putDagVersion(t, spec('d'), 'h', T0);
      const runs = [];
      for (let i = 0; i < 3; i++) runs.push(await store.createRun(newRun(t, 'd')));
      const [a, b, c] = runs.map((r) => r?.id ?? '');
      const tis = await store.listTaskInstancesOfRuns([a ?? '', c ?? '']);
      expect(tis).toHaveLength(4);
      expect(new Set(tis.map((x) => x.dag_run_id))).toEqual(new Set([a, c]));
      expect(tis.some((x) => x.dag_run_id === b)).toBe(false);
      expect(await store.listTaskInstancesOfRuns([])).toEqual([]);
    });

    it('scheduled runs advance last_scheduled_logical_date to the max; manual runs do not', async () => {
      const t = await newTenant();
      await store.putDagVersion(t, spec('d'), 'h', T0);
      const sched = (ld: number) =>
        store.createRun(
          newRun(t, 'd', { run_type: 'scheduled', run_id: `scheduled__${ld}`, logical_date: ld }),
        );
      await sched(T0 + 2 * 86_400_000);
      expect((await store.getDag(t, 'd'))?.last_scheduled_logical_date).toBe(T0 + 2 * 86_400_000);
      // Catch-up / backfill creating an older run must not move the cursor back.
      await sched(T0 + 86_400_000);
      expect((await store.getDag(t, 'd'))?.last_scheduled_logical_date).toBe(T0 + 2 * 86_400_000);
      await store.createRun(newRun(t, 'd', { run_type: 'manual', logical_date: T0 + 9e8 }));
      expect((await store.getDag(t, 'd'))?.last_scheduled_logical_date).toBe(T0 + 2 * 86_400_000);
      await sched(T0 + 3 * 86_400_000);
      expect((await store.getDag(t, 'd'))?.last_scheduled_logical_date).toBe(T0 + 3 * 86_400_000);
    });

    it('listRuns filters by dag and state, newest first, and pages', async () => {
      const t = await newTenant();
      await store.putDagVersion(t, spec('a'), 'h', T0);
      await store.putDagVersion(t, spec('b'), 'h', T0);
      const a1 = await store.createRun(newRun(t, 'a', { run_id: 'a1', now: T0 + 1 }));
      const a2 = await store.createRun(newRun(t, 'a', { run_id: 'a2', now: T0 + 2 }));
      const b1 = await store.createRun(newRun(t, 'b', { run_id: 'b1', now: T0 + 3 }));
      await store.setRunState(a2?.id ?? '', ['queued'], 'running', { started_at: T0 + 4 });

      const runIds = (rows: { run_id: string }[]) => rows.map((r) => r.run_id);
      const page = { limit: 10, offset: 0 };
      expect(runIds(await store.listRuns(t, {}, page))).toEqual(['b1', 'a2', 'a1']);
      expect(runIds(await store.listRuns(t, { dag_id: 'a' }, page))).toEqual(['a2', 'a1']);
      expect(runIds(await store.listRuns(t, { state: 'queued' }, page))).toEqual(['b1', 'a1']);
      expect(runIds(await store.listRuns(t, { dag_id: 'a', state: 'running' }, page))).toEqual([
        'a2',
      ]);
      expect(runIds(await store.listRuns(t, {}, { limit: 1, offset: 1 }))).toEqual(['a2']);
      expect(a1 && b1).toBeDefined();
    });

    it('listRunsInStates spans tenants oldest first; countRunsInStates counts per dag', async () => {
      const t1 = await newTenant('one');
      const t2 = await newTenant('two');
      await store.putDagVersion(t1, spec('d'), 'h', T0);
      await store.putDagVersion(t2, spec('d'), 'h', T0);
      await store.createRun(newRun(t1, 'd', { run_id: 'late', now: T0 + 30 }));
      await store.createRun(newRun(t2, 'd', { run_id: 'early', now: T0 + 10 }));
      const mid = await store.createRun(newRun(t1, 'd', { run_id: 'mid', now: T0 + 20 }));
      await store.setRunState(mid?.id ?? '', ['queued'], 'running', {});

      const mine = (await store.listRunsInStates(['queued', 'running'])).filter(
        (r) => r.tenant_id === t1 || r.tenant_id === t2,
      );
      expect(mine.map((r) => r.run_id)).toEqual(['early', 'mid', 'late']);
      const queuedOnly = (await store.listRunsInStates(['queued'])).filter(
        (r) => r.tenant_id === t1 || r.tenant_id === t2,
      );
      expect(queuedOnly.map((r) => r.run_id)).toEqual(['early', 'late']);
      expect(await store.listRunsInStates([])).toEqual([]);

      expect(await store.countRunsInStates(t1, 'd', ['queued', 'running'])).toBe(2);
      expect(await store.countRunsInStates(t1, 'd', ['running'])).toBe(1);
      expect(await store.countRunsInStates(t2, 'd', ['running'])).toBe(0);
      expect(await store.countRunsInStates(t1, 'd', [])).toBe(0);
    });

    it('setRunState is a compare-and-set and writes only the times it is given', async () => {
      const { run } = await fixture();
      expect(await store.setRunState(run.id, ['running'], 'success', { ended_at: T0 })).toBe(false);
      expect(await store.setRunState(run.id, ['queued'], 'running', { started_at: T0 + 1 })).toBe(
        true,
      );
      expect(await store.getRunById(run.id)).toMatchObject({
        state: 'running',
        started_at: T0 + 1,
        ended_at: null,
      });
      expect(await store.setRunState(run.id, ['running'], 'failed', { ended_at: T0 + 2 })).toBe(
        true,
      );
      expect(await store.getRunById(run.id)).toMatchObject({
        state: 'failed',
        started_at: T0 + 1,
        ended_at: T0 + 2,
      });
      // Clear-and-rerun: explicit nulls reset the times.
      expect(
        await store.setRunState(run.id, ['failed', 'success'], 'queued', {
          started_at: null,
          ended_at: null,
        }),
      ).toBe(true);
      expect(await store.getRunById(run.id)).toMatchObject({
        state: 'queued',
        started_at: null,
        ended_at: null,
      });
      expect(await store.setRunState(run.id, [], 'running', {})).toBe(false);
      expect(await store.setRunState(randomUUID(), ['queued'], 'running', {})).toBe(false);
    });

    it('concurrent setRunState with the same expectation applies once', async () => {
      const { run } = await fixture();
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          store.setRunState(run.id, ['queued'], 'running', { started_at: T0 + i }),
        ),
      );
      expect(results.filter(Boolean)).toHaveLength(1);
    });

    it("previousSuccessInterval: the DAG's latest successful run before a logical date (Airflow's prev_data_interval_*_success)", async () => {
      const t = await newTenant();
      await store.putDagVersion(t, spec('d'), 'h', T0);
      await store.putDagVersion(t, spec('other'), 'h', T0);
      const DAY = 86_400_000;
      const mk = async (dag: string, day: number, state: 'success' | 'failed' | null) => {
        const r = await store.createRun(
          newRun(t, dag, {
            run_type: 'scheduled',
            run_id: `scheduled__${dag}_${day}`,
            logical_date: T0 + day * DAY,
            data_interval_start: T0 + (day - 1) * DAY,
            data_interval_end: T0 + day * DAY,
          }),
        );
        if (state !== null) await store.setRunState(r!.id, ['queued'], state, {});
        return r!;
      };
      await mk('d', 1, 'success');
      await mk('d', 2, 'success');
      await mk('d', 3, 'failed');
      await mk('d', 4, null);
      await mk('other', 4, 'success');
      expect(await store.previousSuccessInterval(t, 'd', T0 + 5 * DAY)).toEqual({
        start: T0 + DAY,
        end: T0 + 2 * DAY,
      });
      // strictly before: the run itself never counts
      expect(await store.previousSuccessInterval(t, 'd', T0 + 2 * DAY)).toEqual({
        start: T0,
        end: T0 + DAY,
      });
      expect(await store.previousSuccessInterval(t, 'd', T0 + DAY)).toBeUndefined();
      expect(await store.previousSuccessInterval(t, 'nope', T0 + 9 * DAY)).toBeUndefined();
    });

    it('setRunVersion rebinds a run to another DAG version', async () => {
      const { tenant_id, dag_id, run } = await fixture();
      await store.putDagVersion(tenant_id, spec(dag_id, ['z']), 'hash-2', T0);
      await store.setRunVersion(run.id, 2);
      expect((await store.getRunById(run.id))?.dag_version).toBe(2);
    });
  });

  describe('task instances', () => {
    it('updateTaskInstance applies the patch only when state and try match', async () => {
      const { extract } = await fixture();
      expect(
        await store.updateTaskInstance(
          extract.id,
          { states: ['queued'] },
          { state: 'running' },
          T0 + 1,
        ),
      ).toBe(false);
      expect(
        await store.updateTaskInstance(
          extract.id,
          { states: ['none', 'scheduled'], try_number: 2 },
          { state: 'queued' },
          T0 + 1,
        ),
      ).toBe(false);
      expect((await ti(extract.id)).state).toBe('none');

      expect(
        await store.updateTaskInstance(
          extract.id,
          { states: ['none', 'scheduled'], try_number: 1 },
          { state: 'queued', queued_at: T0 + 2, hostname: 'host-a', pid: 4242 },
          T0 + 2,
        ),
      ).toBe(true);
      expect(await ti(extract.id)).toMatchObject({
        state: 'queued',
        queued_at: T0 + 2,
        hostname: 'host-a',
        pid: 4242,
        updated_at: T0 + 2,
        try_number: 1,
      });

      expect(
        await store.updateTaskInstance(
          extract.id,
          { states: ['queued'] },
          {
            state: 'failed',
            exit_code: 3,
            error_message: 'boom',
            ended_at: T0 + 3,
            terminate_requested: true,
            max_tries: 5,
            retry_at: T0 + 100,
            hostname: null,
            pid: null,
          },
          T0 + 3,
        ),
      ).toBe(true);
      expect(await ti(extract.id)).toMatchObject({
        state: 'failed',
        exit_code: 3,
        error_message: 'boom',
        ended_at: T0 + 3,
        terminate_requested: true,
        max_tries: 5,
        retry_at: T0 + 100,
        hostname: null,
        pid: null,
        queued_at: T0 + 2,
      });

      expect(
        await store.updateTaskInstance(extract.id, { states: [] }, { state: 'none' }, T0),
      ).toBe(false);
      expect(
        await store.updateTaskInstance(randomUUID(), { states: ['none'] }, { state: 'queued' }, T0),
      ).toBe(false);
    });

    it('a patch cannot rewrite columns outside TaskInstancePatch', async () => {
      const { extract } = await fixture();
      const sneaky = { state: 'queued', try_number: 99, tenant_id: 'other' } as never;
      expect(await store.updateTaskInstance(extract.id, { states: ['none'] }, sneaky, T0)).toBe(
        true,
      );
      expect(await ti(extract.id)).toMatchObject({
        state: 'queued',
        try_number: 1,
        tenant_id: extract.tenant_id,
      });
    });

    it('of 20 concurrent updates with the same expectation exactly one wins', async () => {
      const { extract } = await fixture();
      await store.updateTaskInstance(extract.id, { states: ['none'] }, { state: 'queued' }, T0);
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          store.updateTaskInstance(
            extract.id,
            { states: ['queued'], try_number: 1 },
            { state: 'running', pid: 1000 + i },
            T0 + i,
          ),
        ),
      );
      expect(results.filter(Boolean)).toHaveLength(1);
      const winner = results.indexOf(true);
      expect(await ti(extract.id)).toMatchObject({ state: 'running', pid: 1000 + winner });
    });

    it('listTaskInstancesInStates spans tenants, least recently updated first, limited', async () => {
      // Timestamps far below everyone else's so this test's rows sort first.
      const tA = await newTenant('a');
      const tB = await newTenant('b');
      await store.putDagVersion(tA, spec('d'), 'h', T0);
      await store.putDagVersion(tB, spec('d'), 'h', T0);
      const rA = await store.createRun(newRun(tA, 'd'));
      const rB = await store.createRun(newRun(tB, 'd'));
      const tisA = await store.listTaskInstances(rA?.id ?? '');
      const tisB = await store.listTaskInstances(rB?.id ?? '');
      const order = [tisB[1], tisA[0], tisB[0]];
      for (const [i, row] of order.entries()) {
        await store.updateTaskInstance(
          row?.id ?? '',
          { states: ['none'] },
          { state: 'up_for_reschedule' },
          1 + i,
        );
      }
      const got = await store.listTaskInstancesInStates(['up_for_reschedule', 'scheduled'], 2);
      expect(got.map((r) => r.id)).toEqual([order[0]?.id, order[1]?.id]);
      const all = await store.listTaskInstancesInStates(['up_for_reschedule'], 10_000);
      expect(all.filter((r) => r.tenant_id === tA || r.tenant_id === tB).map((r) => r.id)).toEqual(
        order.map((r) => r?.id),
      );
      expect(await store.listTaskInstancesInStates([], 10)).toEqual([]);
    });

    it('ensureTaskInstances adds only the missing tasks of a run', async () => {
      const { tenant_id, dag_id, run, extract } = await fixture();
      await store.updateTaskInstance(extract.id, { states: ['none'] }, { state: 'success' }, T0);
      const created = await store.ensureTaskInstances(
        run.id,
        [
          { task_id: 'extract', max_tries: 9 },
          { task_id: 'transform', max_tries: 3 },
          { task_id: 'report', max_tries: 1 },
        ],
        T0 + 50,
      );
      expect(created.sort()).toEqual(['report', 'transform']);
      expect(await ti(extract.id)).toMatchObject({ state: 'success', max_tries: 2 });
      expect(await store.getTaskInstance(run.id, 'transform')).toMatchObject({
        tenant_id,
        dag_id,
        dag_run_id: run.id,
        state: 'none',
        try_number: 1,
        max_tries: 3,
        terminate_requested: false,
        updated_at: T0 + 50,
      });
      expect((await store.listTaskInstances(run.id)).map((x) => x.task_id)).toEqual([
        'extract',
        'load',
        'report',
        'transform',
      ]);
      expect(
        await store.ensureTaskInstances(run.id, [{ task_id: 'report', max_tries: 1 }], T0),
      ).toEqual([]);
      expect(await store.ensureTaskInstances(run.id, [], T0)).toEqual([]);
      await expect(
        store.ensureTaskInstances(randomUUID(), [{ task_id: 'x', max_tries: 1 }], T0),
      ).rejects.toThrow(/does not exist/);
    });

    it('countTaskInstancesInStates counts one DAG of one tenant', async () => {
      const { tenant_id, dag_id, extract } = await fixture();
      const other = await fixture();
      await store.updateTaskInstance(extract.id, { states: ['none'] }, { state: 'running' }, T0);
      expect(await store.countTaskInstancesInStates(tenant_id, dag_id, ['running'])).toBe(1);
      expect(await store.countTaskInstancesInStates(tenant_id, dag_id, ['running', 'none'])).toBe(
        2,
      );
      expect(await store.countTaskInstancesInStates(other.tenant_id, dag_id, ['running'])).toBe(0);
      expect(await store.countTaskInstancesInStates(tenant_id, 'elsewhere', ['none'])).toBe(0);
      expect(await store.countTaskInstancesInStates(tenant_id, dag_id, [])).toBe(0);
    });
  });

  describe('archiveAndBumpTry and history', () => {
    async function failedAttempt() {
      const fx = await fixture();
      await store.updateTaskInstance(
        fx.extract.id,
        { states: ['none'] },
        {
          state: 'running',
          queued_at: T0 + 1,
          started_at: T0 + 2,
          hostname: 'h1',
          pid: 7,
          last_heartbeat_at: T0 + 3,
        },
        T0 + 3,
      );
      await store.updateTaskInstance(
        fx.extract.id,
        { states: ['running'], try_number: 1 },
        { state: 'failed', ended_at: T0 + 4, exit_code: 1, error_message: 'exit 1' },
        T0 + 4,
      );
      return fx;
    }

    it('copies the attempt to history, bumps the try and applies the patch', async () => {
      const { run, extract } = await failedAttempt();
      const applied = await store.archiveAndBumpTry(
        extract.id,
        { states: ['failed'], try_number: 1 },
        'failed',
        {
          state: 'up_for_retry',
          retry_at: T0 + 300_000,
          started_at: null,
          ended_at: null,
          exit_code: null,
          error_message: null,
          hostname: null,
          pid: null,
          last_heartbeat_at: null,
          queued_at: null,
        },
        T0 + 5,
      );
      expect(applied).toBe(true);
      expect(await ti(extract.id)).toMatchObject({
        try_number: 2,
        state: 'up_for_retry',
        retry_at: T0 + 300_000,
        started_at: null,
        ended_at: null,
        exit_code: null,
        error_message: null,
        updated_at: T0 + 5,
      });
      expect(await store.listTaskInstanceHistory(run.id)).toEqual([
        {
          id: expect.any(String),
          tenant_id: extract.tenant_id,
          dag_run_id: run.id,
          task_id: 'extract',
          map_index: -1,
          try_number: 1,
          state: 'failed',
          started_at: T0 + 2,
          ended_at: T0 + 4,
          exit_code: 1,
          error_message: 'exit 1',
          archived_at: T0 + 5,
        },
      ]);
    });

    it('is a no-op when the expectation fails', async () => {
      const { run, extract } = await failedAttempt();
      expect(
        await store.archiveAndBumpTry(
          extract.id,
          { states: ['running'] },
          'failed',
          { state: 'scheduled' },
          T0 + 5,
        ),
      ).toBe(false);
      expect(
        await store.archiveAndBumpTry(
          extract.id,
          { states: ['failed'], try_number: 2 },
          'failed',
          { state: 'scheduled' },
          T0 + 5,
        ),
      ).toBe(false);
      expect(
        await store.archiveAndBumpTry(randomUUID(), { states: ['failed'] }, 'failed', {}, T0),
      ).toBe(false);
      expect(await store.archiveAndBumpTry(extract.id, { states: [] }, 'failed', {}, T0)).toBe(
        false,
      );
      expect(await ti(extract.id)).toMatchObject({ try_number: 1, state: 'failed' });
      expect(await store.listTaskInstanceHistory(run.id)).toEqual([]);
    });

    it('of 20 concurrent archives guarded only by try_number exactly one applies', async () => {
      const { run, extract } = await failedAttempt();
      // The patch keeps the row inside the expected states, so only the try guard stops
      // the losers.
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          store.archiveAndBumpTry(
            extract.id,
            { states: ['failed', 'up_for_retry'], try_number: 1 },
            'failed',
            { state: 'up_for_retry', retry_at: T0 + i },
            T0 + 10 + i,
          ),
        ),
      );
      expect(results.filter(Boolean)).toHaveLength(1);
      expect((await ti(extract.id)).try_number).toBe(2);
      const history = await store.listTaskInstanceHistory(run.id, 'extract');
      expect(history).toHaveLength(1);
      expect(history[0]).toMatchObject({ try_number: 1, state: 'failed' });
    });

    it('of 20 concurrent archives guarded only by state exactly one applies', async () => {
      const { run, extract } = await failedAttempt();
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          store.archiveAndBumpTry(
            extract.id,
            { states: ['failed'] },
            'failed',
            { state: 'scheduled' },
            T0 + 10 + i,
          ),
        ),
      );
      expect(results.filter(Boolean)).toHaveLength(1);
      expect(await ti(extract.id)).toMatchObject({ try_number: 2, state: 'scheduled' });
      expect(await store.listTaskInstanceHistory(run.id)).toHaveLength(1);
    });

    it('keeps one history row per archived try, filterable by task', async () => {
      const { run, extract, load } = await failedAttempt();
      for (const n of [1, 2, 3]) {
        expect(
          await store.archiveAndBumpTry(
            extract.id,
            { states: ['failed', 'up_for_retry', 'success'], try_number: n },
            n === 3 ? 'success' : 'failed',
            { state: n === 2 ? 'success' : 'up_for_retry' },
            T0 + 10 * n,
          ),
        ).toBe(true);
      }
      await store.updateTaskInstance(
        load.id,
        { states: ['none'] },
        { state: 'upstream_failed' },
        T0,
      );
      expect(
        await store.archiveAndBumpTry(
          load.id,
          { states: ['upstream_failed'] },
          'upstream_failed',
          { state: 'none' },
          T0 + 50,
        ),
      ).toBe(true);

      const extractHistory = await store.listTaskInstanceHistory(run.id, 'extract');
      expect(extractHistory.map((h) => [h.try_number, h.state, h.archived_at])).toEqual([
        [1, 'failed', T0 + 10],
        [2, 'failed', T0 + 20],
        [3, 'success', T0 + 30],
      ]);
      expect((await ti(extract.id)).try_number).toBe(4);
      const all = await store.listTaskInstanceHistory(run.id);
      expect(all.map((h) => `${h.task_id}#${h.try_number}`)).toEqual([
        'extract#1',
        'extract#2',
        'extract#3',
        'load#1',
      ]);
      expect(await store.listTaskInstanceHistory(randomUUID())).toEqual([]);
    });
  });

  describe('heartbeats', () => {
    it('is live for queued/running at the current try and records the time', async () => {
      const { extract } = await fixture();
      for (const state of ['queued', 'running'] as const) {
        await store.updateTaskInstance(extract.id, { states: ['none', 'queued'] }, { state }, T0);
        expect(await store.recordHeartbeat(extract.id, 1, T0 + 15_000)).toEqual({
          kind: 'live',
          terminate_requested: false,
          credential_revoked: false,
        });
        expect(await ti(extract.id)).toMatchObject({
          last_heartbeat_at: T0 + 15_000,
          // A heartbeat is not a state change.
          updated_at: T0,
        });
      }
    });

    it('a claim records the executor that holds it, and a later claim replaces it', async () => {
      const { extract } = await fixture();
      expect(
        await store.updateTaskInstance(
          extract.id,
          { states: ['none'], try_number: 1 },
          { state: 'queued', executor: 'subprocess' },
          T0,
        ),
      ).toBe(true);
      expect((await ti(extract.id)).executor).toBe('subprocess');
      const queued = await store.listTaskInstancesInStates(['queued'], 10_000);
      expect(queued.find((row) => row.id === extract.id)?.executor).toBe('subprocess');
      await store.updateTaskInstance(
        extract.id,
        { states: ['queued'], try_number: 1 },
        { state: 'scheduled' },
        T0 + 1,
      );
      expect((await ti(extract.id)).executor).toBe('subprocess');
      await store.updateTaskInstance(
        extract.id,
        { states: ['scheduled'], try_number: 1 },
        { state: 'queued', executor: 'kubernetes' },
        T0 + 2,
      );
      expect((await ti(extract.id)).executor).toBe('kubernetes');
    });

    it('pins heartbeats, liveness and compare-and-sets to the dispatch generation when given', async () => {
      const { run, extract } = await fixture();
      // A claim bumps the generation (scheduled → queued, gen 0 → 1).
      expect(
        await store.updateTaskInstance(
          extract.id,
          { states: ['none'], try_number: 1, dispatch_gen: 0 },
          { state: 'queued', dispatch_gen: 1 },
          T0,
        ),
      ).toBe(true);
      expect((await ti(extract.id)).dispatch_gen).toBe(1);
      // A stale generation matches nothing: no heartbeat, not live, no write.
      expect(await store.recordHeartbeat(extract.id, 1, T0 + 1, 0)).toEqual({ kind: 'stale' });
      expect(await store.getAttemptLiveness(run.id, 'extract', 1, 0)).toEqual({
        live: false,
        revoked: false,
      });
      expect(
        await store.updateTaskInstance(
          extract.id,
          { states: ['queued'], try_number: 1, dispatch_gen: 0 },
          { state: 'running' },
          T0 + 1,
        ),
      ).toBe(false);
      expect(
        await store.archiveAndBumpTry(
          extract.id,
          { states: ['queued'], try_number: 1, dispatch_gen: 0 },
          'failed',
          { state: 'up_for_retry' },
          T0 + 1,
        ),
      ).toBe(false);
      // The current generation (or none given) does.
      expect(await store.getAttemptLiveness(run.id, 'extract', 1, 1)).toEqual({
        live: true,
        revoked: false,
      });
      expect(await store.getAttemptLiveness(run.id, 'extract', 1)).toEqual({
        live: true,
        revoked: false,
      });
      expect(await store.recordHeartbeat(extract.id, 1, T0 + 2, 1)).toMatchObject({ kind: 'live' });
      expect((await ti(extract.id)).last_heartbeat_at).toBe(T0 + 2);
    });

    it('reports terminate_requested', async () => {
      const { extract } = await fixture();
      await store.updateTaskInstance(
        extract.id,
        { states: ['none'] },
        { state: 'running', terminate_requested: true },
        T0,
      );
      expect(await store.recordHeartbeat(extract.id, 1, T0 + 1)).toEqual({
        kind: 'live',
        terminate_requested: true,
        credential_revoked: false,
      });
    });

    it('is stale for another try, a non-active state or an unknown id, and writes nothing', async () => {
      const { extract } = await fixture();
      expect(await store.recordHeartbeat(extract.id, 1, T0 + 1)).toEqual({ kind: 'stale' });
      await store.updateTaskInstance(extract.id, { states: ['none'] }, { state: 'running' }, T0);
      expect(await store.recordHeartbeat(extract.id, 2, T0 + 2)).toEqual({ kind: 'stale' });
      expect(await store.recordHeartbeat(randomUUID(), 1, T0 + 2)).toEqual({ kind: 'stale' });
      for (const state of [
        'success',
        'failed',
        'up_for_retry',
        'scheduled',
      ] as TaskInstanceState[]) {
        await store.updateTaskInstance(
          extract.id,
          { states: ['running', 'success', 'failed', 'up_for_retry', 'scheduled'] },
          { state },
          T0,
        );
        expect(await store.recordHeartbeat(extract.id, 1, T0 + 3)).toEqual({ kind: 'stale' });
      }
      expect((await ti(extract.id)).last_heartbeat_at).toBeNull();
    });

    it('the attempt fence reads the latest committed try, generation, state and end', async () => {
      const { extract, run } = await fixture();
      await store.updateTaskInstance(extract.id, { states: ['none'] }, { state: 'running' }, T0);
      expect(await store.getAttemptFence(extract.id)).toEqual({
        tenant_id: extract.tenant_id,
        dag_run_id: run.id,
        task_id: 'extract',
        map_index: -1,
        try_number: 1,
        dispatch_gen: extract.dispatch_gen,
        state: 'running',
        ended_at: null,
      });
      await store.archiveAndBumpTry(
        extract.id,
        { states: ['running'], try_number: 1 },
        'failed',
        { state: 'success', ended_at: T0 + 5 },
        T0 + 1,
      );
      expect(await store.getAttemptFence(extract.id)).toMatchObject({
        try_number: 2,
        state: 'success',
        ended_at: T0 + 5,
      });
      expect(await store.getAttemptFence(randomUUID())).toBeUndefined();
    });

    it('is stale for the superseded try after archiveAndBumpTry', async () => {
      const { extract } = await fixture();
      await store.updateTaskInstance(extract.id, { states: ['none'] }, { state: 'running' }, T0);
      await store.archiveAndBumpTry(
        extract.id,
        { states: ['running'], try_number: 1 },
        'failed',
        { state: 'queued' },
        T0 + 1,
      );
      expect(await store.recordHeartbeat(extract.id, 1, T0 + 2)).toEqual({ kind: 'stale' });
      expect(await store.recordHeartbeat(extract.id, 2, T0 + 2)).toEqual({
        kind: 'live',
        terminate_requested: false,
        credential_revoked: false,
      });
    });
  });

  describe('attempt records', () => {
    function keyOf(f: Awaited<ReturnType<typeof fixture>>, try_number = 1) {
      return {
        tenant_id: f.tenant_id,
        task_instance_id: f.extract.id,
        try_number,
        dag_id: f.dag_id,
        dag_run_id: f.run.id,
        run_id: f.run.run_id,
        task_id: 'extract',
      };
    }

    it('ensure is idempotent; names, refusals, renewals and exp round-trip per try', async () => {
      const f = await fixture('rec');
      await store.ensureAttemptRecord(keyOf(f), T0, T0 + 600_000);
      await store.ensureAttemptRecord(keyOf(f), T0 + 1, T0 + 999); // exists: exp kept
      const modes = { scoping: 'enforce', liveness: 'observe' };
      await store.noteAttemptDelivery(
        f.extract.id,
        1,
        'variables',
        { names: ['b', 'a'] },
        modes,
        T0,
      );
      await store.noteAttemptDelivery(
        f.extract.id,
        1,
        'connections',
        { refusal: 'revoked' },
        modes,
        T0,
      );
      // Renewals are recorded by the renewing heartbeat's own write.
      await store.updateTaskInstance(
        f.extract.id,
        { states: ['none'], try_number: 1 },
        { state: 'running' },
        T0,
      );
      await store.recordHeartbeat(f.extract.id, 1, T0 + 15_000, undefined, {
        credential_exp: T0 + 615_000,
      });
      await store.recordHeartbeat(f.extract.id, 1, T0 + 30_000, undefined, {
        credential_exp: T0 + 630_000,
      });
      await store.noteRenewalStopped(f.extract.id, 1, 'ceiling', T0 + 45_000);
      await store.noteRenewalStopped(f.extract.id, 1, 'expired', T0 + 60_000);
      await store.ensureAttemptRecord(keyOf(f, 2), T0 + 70_000, T0 + 670_000);
      const recs = await store.listAttemptRecords(f.run.id, 'extract');
      expect(recs.map((r) => r.try_number)).toEqual([1, 2]);
      expect(recs[0]).toMatchObject({
        scoping_mode: 'enforce',
        liveness_mode: 'observe',
        variables_delivered: ['a', 'b'],
        connections_delivered: null,
        connections_refusal: 'revoked',
        renewals: 2,
        last_renewed_at: T0 + 30_000,
        renewal_stopped: 'ceiling', // the first reason stays
        credential_exp: T0 + 630_000,
        session_hash: null,
      });
      expect(recs[1]).toMatchObject({
        renewals: 0,
        credential_exp: T0 + 670_000,
        variables_delivered: null,
      });
      expect(await store.getAttemptRecord(f.extract.id, 3)).toBeUndefined();
    });

    it('a renewing heartbeat records the renewal on its own row write, exactly when it hands the token out; the try bump folds it into the record', async () => {
      const f = await fixture('renew');
      const rec = async (try_number = 1) => {
        const r = await store.getAttemptRecord(f.extract.id, try_number);
        return r && { n: r.renewals, at: r.last_renewed_at, exp: r.credential_exp };
      };
      await store.ensureAttemptRecord(keyOf(f), T0, T0 + 600_000);
      await store.updateTaskInstance(f.extract.id, { states: ['none'] }, { state: 'running' }, T0);
      // live: counted, with the new exp and the beat's time
      const renewal = (exp: number) => ({ credential_exp: exp });
      expect(
        await store.recordHeartbeat(f.extract.id, 1, T0 + 15_000, undefined, renewal(T0 + 615_000)),
      ).toMatchObject({ kind: 'live', terminate_requested: false, credential_revoked: false });
      expect(await rec()).toEqual({ n: 1, at: T0 + 15_000, exp: T0 + 615_000 });
      // a beat without a renewal leaves the record alone
      await store.recordHeartbeat(f.extract.id, 1, T0 + 30_000);
      expect(await rec()).toEqual({ n: 1, at: T0 + 15_000, exp: T0 + 615_000 });
      // wrong try or dispatch generation: stale, nothing recorded
      expect(
        await store.recordHeartbeat(f.extract.id, 2, T0 + 31_000, undefined, renewal(T0 + 1)),
      ).toEqual({ kind: 'stale' });
      expect(await store.recordHeartbeat(f.extract.id, 1, T0 + 31_000, 7, renewal(T0 + 1))).toEqual(
        {
          kind: 'stale',
        },
      );
      expect(await rec()).toEqual({ n: 1, at: T0 + 15_000, exp: T0 + 615_000 });
      await store.recordHeartbeat(f.extract.id, 1, T0 + 45_000, undefined, renewal(T0 + 645_000));
      expect(await rec()).toEqual({ n: 2, at: T0 + 45_000, exp: T0 + 645_000 });
      // termination requested: answered live, the token is not handed out, nothing recorded
      await store.updateTaskInstance(
        f.extract.id,
        { states: ['running'] },
        { terminate_requested: true },
        T0,
      );
      expect(
        await store.recordHeartbeat(f.extract.id, 1, T0 + 60_000, undefined, renewal(T0 + 660_000)),
      ).toMatchObject({ kind: 'live', terminate_requested: true });
      expect(await rec()).toEqual({ n: 2, at: T0 + 45_000, exp: T0 + 645_000 });
      await store.updateTaskInstance(
        f.extract.id,
        { states: ['running'] },
        { terminate_requested: false },
        T0,
      );
      // revoked: likewise
      await store.revokeAttemptCredential(f.extract.id, 1, T0);
      expect(
        await store.recordHeartbeat(f.extract.id, 1, T0 + 75_000, undefined, renewal(T0 + 675_000)),
      ).toMatchObject({ kind: 'live', credential_revoked: true });
      expect(await rec()).toEqual({ n: 2, at: T0 + 45_000, exp: T0 + 645_000 });
      // the next try: its renewals go to its own record, never to the superseded one's
      await store.archiveAndBumpTry(
        f.extract.id,
        { states: ['running'], try_number: 1 },
        'failed',
        { state: 'running' },
        T0 + 80_000,
      );
      await store.ensureAttemptRecord(keyOf(f, 2), T0 + 80_000, T0 + 680_000);
      await store.recordHeartbeat(f.extract.id, 2, T0 + 95_000, undefined, renewal(T0 + 695_000));
      expect(await rec(2)).toEqual({ n: 1, at: T0 + 95_000, exp: T0 + 695_000 });
      expect(await rec(1)).toEqual({ n: 2, at: T0 + 45_000, exp: T0 + 645_000 });
    });

    it('binds a session once: bound, then same, then conflict for another hash', async () => {
      const f = await fixture('sess');
      await store.ensureAttemptRecord(keyOf(f), T0, T0 + 600_000);
      expect(await store.bindAttemptSession(f.extract.id, 1, 'h1', T0)).toBe('bound');
      expect(await store.bindAttemptSession(f.extract.id, 1, 'h1', T0 + 1)).toBe('same');
      expect(await store.bindAttemptSession(f.extract.id, 1, 'h2', T0 + 2)).toBe('conflict');
      expect(await store.getAttemptRecord(f.extract.id, 1)).toMatchObject({
        session_hash: 'h1',
        registered_at: T0,
      });
    });

    it('binds the exchanging pod once per attempt: a later dispatch may rebind, nothing else', async () => {
      const f = await fixture('exch');
      // no record yet: the bind creates it
      expect(await store.bindExchangedPod(keyOf(f), 0, 'uid-a', T0, T0 + 600_000)).toBe('bound');
      expect(await store.getAttemptRecord(f.extract.id, 1)).toMatchObject({
        credential_exp: T0 + 600_000,
      });
      // another pod, or the same one again, for the same dispatch: taken
      expect(await store.bindExchangedPod(keyOf(f), 0, 'uid-b', T0 + 1, T0 + 600_001)).toBe(
        'taken',
      );
      expect(await store.bindExchangedPod(keyOf(f), 0, 'uid-a', T0 + 2, T0 + 600_002)).toBe(
        'taken',
      );
      // a re-dispatch of the same try (generation 1) binds its own pod, once
      expect(await store.bindExchangedPod(keyOf(f), 1, 'uid-c', T0 + 3, T0 + 600_003)).toBe(
        'bound',
      );
      expect(await store.bindExchangedPod(keyOf(f), 1, 'uid-d', T0 + 4, T0 + 600_004)).toBe(
        'taken',
      );
      // an older dispatch never takes the attempt back
      expect(await store.bindExchangedPod(keyOf(f), 0, 'uid-e', T0 + 5, T0 + 600_005)).toBe(
        'taken',
      );
      // the next try has a record of its own
      expect(await store.bindExchangedPod(keyOf(f, 2), 0, 'uid-f', T0 + 6, T0 + 600_006)).toBe(
        'bound',
      );
      // two replicas racing for one attempt: exactly one binds
      const g = await fixture('exch-race');
      const raced = await Promise.all([
        store.bindExchangedPod(keyOf(g), 0, 'uid-x', T0, T0 + 600_000),
        store.bindExchangedPod(keyOf(g), 0, 'uid-y', T0, T0 + 600_000),
      ]);
      expect(raced.sort()).toEqual(['bound', 'taken']);
    });

    it('undeclared reads are recorded once per attempt and summarised per DAG of one tenant', async () => {
      const f = await fixture('d5');
      const other = await fixture('d5-other');
      await store.ensureAttemptRecord(keyOf(f), T0, T0 + 600_000);
      await store.ensureAttemptRecord(keyOf(f, 2), T0, T0 + 600_000);
      await store.ensureAttemptRecord(keyOf(other), T0, T0 + 600_000);
      const reads = { variables: ['v2'], connections: [] };
      expect(await store.noteUndeclaredReads(f.extract.id, 1, reads, T0 + 5)).toBe(true);
      expect(await store.noteUndeclaredReads(f.extract.id, 1, reads, T0 + 6)).toBe(false);
      expect(
        await store.noteUndeclaredReads(
          f.extract.id,
          2,
          { variables: ['v3'], connections: ['c'] },
          T0 + 9,
        ),
      ).toBe(true);
      await store.noteUndeclaredReads(
        other.extract.id,
        1,
        { variables: ['x'], connections: [] },
        T0,
      );
      expect(await store.summarizeUndeclaredUse(f.tenant_id)).toEqual([
        {
          dag_id: 'etl',
          variables: ['v2', 'v3'],
          connections: ['c'],
          attempts: 2,
          last_seen: T0 + 9,
        },
      ]);
      expect(await store.summarizeUndeclaredUse(f.tenant_id, 'nope')).toEqual([]);
    });
  });

  describe('xcom', () => {
    it('stores bytes exactly, overwrites on the same key and lists in order', async () => {
      const { tenant_id, run } = await fixture();
      const row = (task_id: string, key: string, value: Uint8Array, created_at = T0) => ({
        tenant_id,
        dag_run_id: run.id,
        task_id,
        key,
        value,
        content_type: 'application/json',
        created_at,
      });
      const bytes = new Uint8Array(256 * 1024);
      for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 31) % 256;
      await store.putXCom(row('load', 'z', new TextEncoder().encode('"z"')));
      await store.putXCom(row('extract', 'return_value', bytes));
      await store.putXCom(row('extract', 'a', new Uint8Array([])));

      const got = await store.getXCom(run.id, 'extract', 'return_value');
      expect(got?.value).toBeInstanceOf(Uint8Array);
      expect(got?.value.byteLength).toBe(bytes.byteLength);
      // Buffer.equals instead of toEqual: element-wise diffing of 256 KiB takes seconds.
      expect(Buffer.from(got?.value ?? []).equals(Buffer.from(bytes))).toBe(true);
      expect(got).toMatchObject({ tenant_id, content_type: 'application/json', created_at: T0 });

      // A view into a larger buffer must store only its own bytes.
      const backing = new Uint8Array([9, 9, 1, 2, 3, 9]);
      await store.putXCom({
        ...row('extract', 'return_value', backing.subarray(2, 5), T0 + 1),
        content_type: 'application/octet-stream',
      });
      expect(await store.getXCom(run.id, 'extract', 'return_value')).toEqual({
        ...row('extract', 'return_value', new Uint8Array([1, 2, 3]), T0 + 1),
        map_index: -1,
        content_type: 'application/octet-stream',
      });

      expect((await store.listXComs(run.id)).map((x) => `${x.task_id}/${x.key}`)).toEqual([
        'extract/a',
        'extract/return_value',
        'load/z',
      ]);
      expect((await store.listXComs(run.id, 'extract')).map((x) => x.key)).toEqual([
        'a',
        'return_value',
      ]);
      expect((await store.getXCom(run.id, 'extract', 'a'))?.value).toEqual(new Uint8Array([]));
      expect(await store.getXCom(run.id, 'extract', 'missing')).toBeUndefined();
    });
  });

  describe('xcom fence', () => {
    it('putXComIfLive writes only for the live try and dispatch generation in queued|running, and never overwrites from an old one', async () => {
      const { tenant_id, run, extract } = await fixture('xfence');
      const row = (v: string) => ({
        tenant_id,
        dag_run_id: run.id,
        task_id: 'extract',
        key: 'k',
        value: new TextEncoder().encode(v),
        content_type: 'text/plain',
        created_at: T0,
      });
      const at = (try_number: number, dispatch_gen = 0) => ({
        task_instance_id: extract.id,
        try_number,
        dispatch_gen,
      });
      const value = async () =>
        new TextDecoder().decode((await store.getXCom(run.id, 'extract', 'k'))!.value);
      // state none: not live
      expect(await store.putXComIfLive(row('early'), at(1))).toBe(false);
      await store.updateTaskInstance(extract.id, { states: ['none'] }, { state: 'running' }, T0);
      expect(await store.putXComIfLive(row('live-1'), at(1))).toBe(true);
      expect(
        await store.archiveAndBumpTry(
          extract.id,
          { states: ['running'] },
          'failed',
          { state: 'queued' },
          T0,
        ),
      ).toBe(true);
      expect(await store.putXComIfLive(row('stale-1'), at(1))).toBe(false);
      expect(await store.putXComIfLive(row('live-2'), at(2))).toBe(true);
      expect(await value()).toBe('live-2');
      // a requeue: same try, next dispatch generation; the old generation no longer writes
      expect(
        await store.updateTaskInstance(
          extract.id,
          { states: ['queued'], try_number: 2, dispatch_gen: 0 },
          { dispatch_gen: 1 },
          T0,
        ),
      ).toBe(true);
      expect(await store.putXComIfLive(row('live-2-gen1'), at(2, 1))).toBe(true);
      expect(await store.putXComIfLive(row('stale-2-gen0'), at(2, 0))).toBe(false);
      expect(await value()).toBe('live-2-gen1');
      expect(
        await store.putXComIfLive(row('x'), { ...at(1), task_instance_id: 'no-such-ti' }),
      ).toBe(false);
    });
  });

  describe('logs', () => {
    function lines(
      key: { tenant_id: string; dag_run_id: string; task_id: string; try_number: number },
      numbers: number[],
      tag = 'm',
    ): LogLineRow[] {
      return numbers.map((n) => ({
        ...key,
        line_number: n,
        time: T0 + n,
        stream: n % 2 === 0 ? 'stderr' : 'stdout',
        message: `${tag} ${n}`,
      }));
    }

    it('appends, ignores re-sent lines and pages by line number', async () => {
      const { tenant_id, run } = await fixture();
      const key = { tenant_id, dag_run_id: run.id, task_id: 'extract', try_number: 1 };
      await store.appendLogs(lines(key, [1, 2, 3]));
      // The agent retries a batch after a lost ack: overlap must not duplicate or overwrite.
      await store.appendLogs(lines(key, [3, 4, 2, 5], 'resent'));
      await store.appendLogs([]);

      const all = await store.readLogs(run.id, 'extract', 1, 0, 100);
      expect(all.map((l) => l.message)).toEqual(['m 1', 'm 2', 'm 3', 'resent 4', 'resent 5']);
      expect(all[0]).toEqual({
        tenant_id,
        dag_run_id: run.id,
        task_id: 'extract',
        map_index: -1,
        try_number: 1,
        line_number: 1,
        time: T0 + 1,
        stream: 'stdout',
        message: 'm 1',
      });
      expect((await store.readLogs(run.id, 'extract', 1, 0, 2)).map((l) => l.line_number)).toEqual([
        1, 2,
      ]);
      expect((await store.readLogs(run.id, 'extract', 1, 2, 2)).map((l) => l.line_number)).toEqual([
        3, 4,
      ]);
      expect(await store.readLogs(run.id, 'extract', 1, 5, 2)).toEqual([]);
      expect(await store.readLogs(run.id, 'extract', 2, 0, 10)).toEqual([]);
      expect(await store.readLogs(run.id, 'load', 1, 0, 10)).toEqual([]);
    });

    it('counts stored UTF-8 bytes per attempt and upserts one line in place', async () => {
      const { tenant_id, run } = await fixture();
      const key = { tenant_id, dag_run_id: run.id, task_id: 'extract', try_number: 1 };
      const note = 2_147_483_647;
      // 'é' is 2 bytes, '€' 3, '𝄞' 4: bytes, not characters, are counted.
      await store.appendLogs([
        { ...key, line_number: 1, time: T0, stream: 'stdout', message: 'aé' },
        { ...key, line_number: 2, time: T0, stream: 'stdout', message: '€𝄞' },
      ]);
      await store.putLogLine({
        ...key,
        line_number: note,
        time: T0,
        stream: 'agent',
        message: 'x',
      });
      await store.putLogLine({
        ...key,
        line_number: note,
        time: T0 + 1,
        stream: 'agent',
        message: 'second',
      });
      expect(await store.logBytes(run.id, 'extract', 1, note)).toBe(3 + 7);
      expect(await store.logBytes(run.id, 'extract', 2, note)).toBe(0);
      const all = await store.readLogs(run.id, 'extract', 1, 0, 10);
      expect(all.map((l) => [l.line_number, l.message, l.time])).toEqual([
        [1, 'aé', T0],
        [2, '€𝄞', T0],
        [note, 'second', T0 + 1],
      ]);
    });

    it('appendLogsIfNotSuperseded writes only while the row holds the try and dispatch generation', async () => {
      const { tenant_id, run, extract } = await fixture('lfence');
      const key = (try_number: number) => ({
        tenant_id,
        dag_run_id: run.id,
        task_id: 'extract',
        try_number,
      });
      const note = (try_number: number, message: string): LogLineRow => ({
        ...key(try_number),
        line_number: 2_147_483_647,
        time: T0,
        stream: 'agent',
        message,
      });
      const fence = (try_number: number, dispatch_gen: number) => ({
        task_instance_id: extract.id,
        try_number,
        dispatch_gen,
      });
      const messages = async (try_number: number) =>
        (await store.readLogs(run.id, 'extract', try_number, 0, 100)).map((l) => l.message);

      await store.updateTaskInstance(extract.id, { states: ['none'] }, { state: 'queued' }, T0);
      // a requeue moves the queued try to the next dispatch generation: generation 0 is fenced
      expect(
        await store.updateTaskInstance(
          extract.id,
          { states: ['queued'], try_number: 1, dispatch_gen: 0 },
          { dispatch_gen: 1 },
          T0,
        ),
      ).toBe(true);
      expect(
        await store.appendLogsIfNotSuperseded(
          fence(1, 0),
          lines(key(1), [1, 2], 'gen0'),
          note(1, 'n0'),
        ),
      ).toBe(false);
      expect(await messages(1)).toEqual([]);
      // the current generation lands, note included (its line numbers are not taken by gen 0)
      expect(
        await store.appendLogsIfNotSuperseded(
          fence(1, 1),
          lines(key(1), [1, 2], 'gen1'),
          note(1, 'n1'),
        ),
      ).toBe(true);
      expect(await messages(1)).toEqual(['gen1 1', 'gen1 2', 'n1']);
      // its state is not compared: a finished try still ships its last lines
      await store.updateTaskInstance(extract.id, { states: ['queued'] }, { state: 'failed' }, T0);
      expect(await store.appendLogsIfNotSuperseded(fence(1, 1), lines(key(1), [3], 'gen1'))).toBe(
        true,
      );
      // a retry supersedes try 1: its lines (and its note) no longer land; try 2's do
      expect(
        await store.archiveAndBumpTry(
          extract.id,
          { states: ['failed'] },
          'failed',
          { state: 'queued' },
          T0,
        ),
      ).toBe(true);
      const live = await store.getAttemptFence(extract.id);
      expect(live).toMatchObject({ try_number: 2 });
      expect(
        await store.appendLogsIfNotSuperseded(
          fence(1, 1),
          lines(key(1), [4], 'stale'),
          note(1, 'x'),
        ),
      ).toBe(false);
      expect(await messages(1)).toEqual(['gen1 1', 'gen1 2', 'gen1 3', 'n1']);
      expect(
        await store.appendLogsIfNotSuperseded(
          fence(2, live!.dispatch_gen),
          lines(key(2), [1], 'try2'),
        ),
      ).toBe(true);
      expect(await messages(2)).toEqual(['try2 1']);
      expect(await store.appendLogsIfNotSuperseded(fence(1, 0), [], note(1, 'x'))).toBe(false);
      expect(
        await store.appendLogsIfNotSuperseded(
          { task_instance_id: 'no-such-ti', try_number: 1, dispatch_gen: 0 },
          lines(key(1), [9]),
        ),
      ).toBe(false);
      expect(await messages(1)).not.toContain('m 9');
    });

    it('keeps attempts apart and handles large batches', async () => {
      const { tenant_id, run } = await fixture();
      const k1 = { tenant_id, dag_run_id: run.id, task_id: 'extract', try_number: 1 };
      const k2 = { ...k1, try_number: 2 };
      const many = Array.from({ length: 2500 }, (_, i) => i + 1);
      await store.appendLogs([...lines(k1, many), ...lines(k2, [1], 'second')]);
      await store.appendLogs(lines(k1, many, 'dup'));
      const first = await store.readLogs(run.id, 'extract', 1, 0, 10_000);
      expect(first).toHaveLength(2500);
      expect(first.every((l) => l.message.startsWith('m '))).toBe(true);
      expect((await store.readLogs(run.id, 'extract', 2, 0, 10)).map((l) => l.message)).toEqual([
        'second 1',
      ]);
    });

    it('property: paging through any append sequence yields the first-written line per number', async () => {
      const { tenant_id, run } = await fixture();
      let attempt = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.uniqueArray(fc.integer({ min: 1, max: 40 }), { maxLength: 15 }), {
            maxLength: 6,
          }),
          fc.integer({ min: 1, max: 7 }),
          async (batches, pageSize) => {
            attempt += 1;
            const key = { tenant_id, dag_run_id: run.id, task_id: `p${attempt}`, try_number: 1 };
            const model = new Map<number, string>();
            for (const [b, batch] of batches.entries()) {
              const rows = lines(key, batch, `b${b}`);
              for (const r of rows)
                if (!model.has(r.line_number)) model.set(r.line_number, r.message);
              await store.appendLogs(rows);
            }
            const seen: string[] = [];
            let after = 0;
            for (;;) {
              const page = await store.readLogs(run.id, key.task_id, 1, after, pageSize);
              expect(page.length).toBeLessThanOrEqual(pageSize);
              if (page.length === 0) break;
              seen.push(...page.map((l) => l.message));
              after = page[page.length - 1]?.line_number ?? after;
            }
            const expected = [...model.entries()].sort((a, b) => a[0] - b[0]).map((e) => e[1]);
            expect(seen).toEqual(expected);
          },
        ),
        { numRuns: 25 },
      );
    });
  });

  describe('tenant isolation', () => {
    it('list and count methods never return another tenant’s rows', async () => {
      const a = await newTenant('iso-a');
      const b = await newTenant('iso-b');
      // Same dag_id and run_id in both tenants: the keys are per tenant.
      for (const t of [a, b]) {
        await store.putDagVersion(t, spec('shared'), `hash-${t}`, T0);
        await store.createRun(newRun(t, 'shared', { run_id: 'same-run-id' }));
      }
      await store.putDagVersion(a, spec('only-a'), 'h', T0);

      expect((await store.listDags(a, { limit: 10, offset: 0 })).map((d) => d.dag_id)).toEqual([
        'only-a',
        'shared',
      ]);
      expect((await store.listDags(b, { limit: 10, offset: 0 })).map((d) => d.dag_id)).toEqual([
        'shared',
      ]);
      expect(await store.getDag(b, 'only-a')).toBeUndefined();
      expect(await store.getDagVersion(a, 'shared', 1)).toMatchObject({ spec_hash: `hash-${a}` });
      expect(await store.getDagVersion(b, 'shared', 1)).toMatchObject({ spec_hash: `hash-${b}` });
      expect(await store.listDagVersions(b, 'only-a')).toEqual([]);

      const runsA = await store.listRuns(a, {}, { limit: 10, offset: 0 });
      const runsB = await store.listRuns(b, {}, { limit: 10, offset: 0 });
      expect(runsA.map((r) => r.tenant_id)).toEqual([a]);
      expect(runsB.map((r) => r.tenant_id)).toEqual([b]);
      expect(runsA[0]?.id).not.toBe(runsB[0]?.id);
      expect((await store.getRun(b, 'shared', 'same-run-id'))?.id).toBe(runsB[0]?.id);
      expect(await store.listRuns(b, { dag_id: 'only-a' }, { limit: 10, offset: 0 })).toEqual([]);

      expect(await store.countRunsInStates(a, 'shared', ['queued'])).toBe(1);
      expect(await store.countTaskInstancesInStates(a, 'shared', ['none'])).toBe(2);
      const tisA = await store.listTaskInstances(runsA[0]?.id ?? '');
      expect(tisA.every((x) => x.tenant_id === a)).toBe(true);
    });
  });

  registerVaultStoreCases({
    store: () => store,
    open: () => harness.open(),
    newTenant,
    fixture,
    T0,
  });

  registerWarmPoolMemberCases({ store: () => store, open: () => harness.open(), T0 });

  registerTaskMappingCases({ store: () => store, fixture, T0 });
}
