import { afterAll, beforeAll, expect, it } from 'vitest';
import { createApiHarness, type ApiHarness, type SeededTenant } from '../support/api-harness.js';
import { forEachDialect } from '../support/dialects.js';
import { spec, task } from '../support/spec-builders.js';

/**
 * POST /api/v1/dags/:dag_id/runs/:run_id/mark (issue 43, item 4): Airflow's mark success /
 * mark failed over the REST API, on both stores: the downstream/upstream closure, the whole run,
 * the audit record, and bad input answered with an LF_ code and nothing written.
 */
forEachDialect('mark success / failed over the API', (dialect) => {
  let h: ApiHarness;
  let t: SeededTenant;
  const dag = 'chain';

  async function states(runId: string): Promise<Record<string, string>> {
    const res = await h.request(t.adminToken, 'GET', `/api/v1/dags/${dag}/runs/${runId}`);
    expect(res.status, res.text).toBe(200);
    const tis = res.json.task_instances as { task_id: string; state: string }[];
    return Object.fromEntries(tis.map((x) => [x.task_id, x.state]));
  }

  async function trigger(runId: string): Promise<void> {
    const res = await h.request(t.adminToken, 'POST', `/api/v1/dags/${dag}/runs`, {
      run_id: runId,
    });
    expect(res.status, res.text).toBe(200);
  }

  beforeAll(async () => {
    h = await createApiHarness(dialect);
    t = await h.seedTenant('mark-team');
    // a → b → c, and d beside them
    const res = await h.request(
      t.adminToken,
      'POST',
      '/api/v1/dags',
      spec({
        dag_id: dag,
        tasks: [
          task('a'),
          task('b', { depends_on: ['a'] }),
          task('c', { depends_on: ['b'] }),
          task('d'),
        ],
      }),
    );
    expect(res.status, res.text).toBe(200);
  });
  afterAll(() => h.close());

  it('marks a task with its downstream only, and audits who did it', async () => {
    await trigger('m1');
    const res = await h.request(t.adminToken, 'POST', `/api/v1/dags/${dag}/runs/m1/mark`, {
      state: 'success',
      task_ids: ['b'],
      downstream: true,
    });
    expect(res.status, res.text).toBe(200);
    expect(res.json.marked).toEqual(['b', 'c']);
    expect(await states('m1')).toEqual({ a: 'none', b: 'success', c: 'success', d: 'none' });
    const audit = await h.request(t.adminToken, 'GET', '/api/v1/audit?action=task.mark');
    const events = audit.json.events as { resource_id: string; payload: unknown }[];
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      resource_id: `${dag}/m1`,
      payload: { state: 'success', task_ids: ['b'], downstream: true, marked: ['b', 'c'] },
    });
  });

  it('marks a task with its upstream: failed', async () => {
    await trigger('m2');
    const res = await h.request(t.adminToken, 'POST', `/api/v1/dags/${dag}/runs/m2/mark`, {
      state: 'failed',
      task_ids: ['b'],
      upstream: true,
    });
    expect(res.status, res.text).toBe(200);
    expect(res.json.marked).toEqual(['a', 'b']);
    expect(await states('m2')).toEqual({ a: 'failed', b: 'failed', c: 'none', d: 'none' });
  });

  it('marks a whole run success (every task) and the run takes the state at once', async () => {
    await trigger('m3');
    const res = await h.request(t.adminToken, 'POST', `/api/v1/dags/${dag}/runs/m3/mark`, {
      state: 'success',
    });
    expect(res.status, res.text).toBe(200);
    expect((res.json.run as { state: string }).state).toBe('success');
    expect(await states('m3')).toEqual({ a: 'success', b: 'success', c: 'success', d: 'success' });
    const again = await h.request(t.adminToken, 'POST', `/api/v1/dags/${dag}/runs/m3/mark`, {
      state: 'success',
    });
    expect(again.json.marked).toEqual([]);
  });

  it('marks a whole run failed: unfinished tasks skipped, finished ones left as they ended', async () => {
    await trigger('m4');
    await h.request(t.adminToken, 'POST', `/api/v1/dags/${dag}/runs/m4/mark`, {
      state: 'success',
      task_ids: ['a'],
    });
    const res = await h.request(t.adminToken, 'POST', `/api/v1/dags/${dag}/runs/m4/mark`, {
      state: 'failed',
    });
    expect(res.status, res.text).toBe(200);
    expect((res.json.run as { state: string }).state).toBe('failed');
    expect(await states('m4')).toEqual({ a: 'success', b: 'skipped', c: 'skipped', d: 'skipped' });
    const audit = await h.request(t.adminToken, 'GET', '/api/v1/audit?action=run.mark');
    const events = audit.json.events as { resource_id: string; payload: unknown }[];
    // m3 twice (the second marked nothing, and is recorded all the same), m4 once
    expect(events.map((e) => e.resource_id).sort()).toEqual([
      `${dag}/m3`,
      `${dag}/m3`,
      `${dag}/m4`,
    ]);
    expect(events.find((e) => e.resource_id === `${dag}/m4`)?.payload).toMatchObject({
      state: 'failed',
      task_ids: null,
      marked: ['b', 'c', 'd'],
    });
  });

  it('bad input: an LF_ code, and nothing is written (not even the valid tasks beside it)', async () => {
    await trigger('m5');
    const before = await states('m5');
    const unknownTask = await h.request(t.adminToken, 'POST', `/api/v1/dags/${dag}/runs/m5/mark`, {
      state: 'success',
      task_ids: ['a', 'nope'],
    });
    expect(unknownTask.status).toBe(404);
    expect(unknownTask.json.code).toBe('LF_TASK_NOT_FOUND');
    const badState = await h.request(t.adminToken, 'POST', `/api/v1/dags/${dag}/runs/m5/mark`, {
      state: 'running',
      task_ids: ['a'],
    });
    expect(badState.status).toBe(400);
    expect(badState.json.code).toBe('LF_BAD_REQUEST');
    const noRun = await h.request(t.adminToken, 'POST', `/api/v1/dags/${dag}/runs/zz/mark`, {
      state: 'success',
    });
    expect(noRun.status).toBe(404);
    expect(noRun.json.code).toBe('LF_RUN_NOT_FOUND');
    expect(await states('m5')).toEqual(before);
    const audit = await h.request(t.adminToken, 'GET', '/api/v1/audit?action=task.mark');
    expect(
      (audit.json.events as { resource_id: string }[]).map((e) => e.resource_id),
    ).not.toContain(`${dag}/m5`);
  });

  it('a developer may clear but not mark', async () => {
    await trigger('m6');
    const dev = await h.tokenFor(t.tenant, 'developer');
    const res = await h.request(dev, 'POST', `/api/v1/dags/${dag}/runs/m6/mark`, {
      state: 'success',
    });
    expect(res.status).toBe(403);
    expect(res.json.code).toBe('LF_FORBIDDEN');
    expect(await states('m6')).toEqual({ a: 'none', b: 'none', c: 'none', d: 'none' });
  });
});
