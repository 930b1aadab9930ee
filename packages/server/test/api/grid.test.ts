import { afterAll, beforeAll, expect, it } from 'vitest';
import { createApiHarness, type ApiHarness, type SeededTenant } from '../support/api-harness.js';
import { forEachDialect } from '../support/dialects.js';

/** GET /api/v1/dags/:dag_id/grid: the web app's grid in one request. */
forEachDialect('the grid route', (dialect) => {
  let h: ApiHarness;
  let t: SeededTenant;

  beforeAll(async () => {
    h = await createApiHarness(dialect);
    t = await h.seedTenant('grid-team');
    for (const run_id of ['g1', 'g2', 'g3']) {
      h.clock.advance(1000);
      const res = await h.request(t.adminToken, 'POST', `/api/v1/dags/${t.dag_id}/runs`, {
        run_id,
      });
      expect(res.status, res.text).toBe(200);
    }
  });
  afterAll(() => h.close());

  it('returns the newest runs first, each with all of its own task instances, up to the limit', async () => {
    const res = await h.request(t.adminToken, 'GET', `/api/v1/dags/${t.dag_id}/grid?limit=2`);
    expect(res.status, res.text).toBe(200);
    const runs = res.json.runs as {
      run: { run_id: string };
      task_instances: { task_id: string }[];
    }[];
    expect(runs.map((r) => r.run.run_id)).toEqual(['g3', 'g2']);
    const one = await h.request(t.adminToken, 'GET', `/api/v1/dags/${t.dag_id}/runs/g3`);
    const expected = (one.json.task_instances as { task_id: string }[]).map((x) => x.task_id);
    expect(expected.length).toBeGreaterThan(0);
    for (const r of runs)
      expect(r.task_instances.map((x) => x.task_id).sort()).toEqual([...expected].sort());
  });

  it('refuses a limit above 100 and names an unknown DAG', async () => {
    const big = await h.request(t.adminToken, 'GET', `/api/v1/dags/${t.dag_id}/grid?limit=101`);
    expect(big.status).toBe(400);
    const none = await h.request(t.adminToken, 'GET', '/api/v1/dags/no_such_dag/grid');
    expect(none.status).toBe(404);
    expect(none.json.code).toBe('LF_DAG_NOT_FOUND');
  });
});
