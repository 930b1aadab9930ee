import { ROUTE_PERMISSIONS } from '../../src/api/route-permissions.js';
import { SEEDED_CELL, type SeededTenant } from '../support/api-harness.js';
import { spec, task } from '../support/spec-builders.js';

export interface RouteCase {
  key: string;
  method: string;
  /** the route pattern, e.g. /api/v1/dags/:dag_id */
  pattern: string;
  access: string;
  /** the concrete URL for the given tenant's objects */
  url(t: SeededTenant): string;
  body(t: SeededTenant): unknown;
}

/**
 * One concrete request per entry of ROUTE_PERMISSIONS, naming objects of a seeded tenant, with a
 * body that passes validation. Generated from the table, so a new route shows up in every suite
 * that uses this — and a route whose parameters or body this file cannot fill fails loudly.
 */
export function routeCases(): RouteCase[] {
  return Object.entries(ROUTE_PERMISSIONS).map(([key, access]) => {
    const [method = '', pattern = ''] = key.split(' ');
    return {
      key,
      method,
      pattern,
      access,
      url: (t) => fillPath(pattern, t),
      body: (t) => bodyFor(key, t),
    };
  });
}

function fillPath(pattern: string, t: SeededTenant): string {
  return pattern.replace(/:([a-z_]+)/g, (_m, name: string) => {
    const v: Record<string, string> = {
      dag_id: t.dag_id,
      run_id: t.run_id,
      task_id: t.task_id,
      version: '1',
      key: t.variable,
      id: t.connection,
      jti: t.tokenJti,
      tenant_id: t.tenant,
      name: t.runner,
      cell: SEEDED_CELL,
    };
    const value = v[name];
    if (value === undefined) throw new Error(`route-fixtures: no value for :${name} in ${pattern}`);
    return encodeURIComponent(value);
  });
}

function bodyFor(key: string, t: SeededTenant): unknown {
  const bodies: Record<string, unknown> = {
    'POST /api/v1/dags': spec({
      dag_id: `pushed_${t.tenant.replace(/-/g, '_')}`,
      tasks: [task('a')],
    }),
    'PATCH /api/v1/dags/:dag_id': { is_paused: true },
    'POST /api/v1/dags/:dag_id/runs': {},
    'POST /api/v1/dags/:dag_id/runs/:run_id/clear': { task_ids: ['a'] },
    'POST /api/v1/dags/:dag_id/runs/:run_id/mark': { state: 'success', task_ids: ['a'] },
    'POST /api/v1/dags/:dag_id/runs/:run_id/tasks/:task_id/revoke-credential': {},
    'PUT /api/v1/variables/:key': { value: 'overwritten' },
    'POST /api/v1/variables/import': { variables: [{ key: 'imported_var', value: 'v' }] },
    'POST /api/v1/variables/export': undefined,
    // a dry run: the same permission check, and the seeded secret stays granted to its DAG
    'PUT /api/v1/variables/:key/grants': { grants: null, dry_run: true },
    'PUT /api/v1/connections/:id/grants': { grants: null, dry_run: true },
    'PUT /api/v1/connections/:id': { uri: 'postgres://x:overwritten@elsewhere:5432/y' },
    'POST /api/v1/connections/:id/test': {},
    'POST /api/v1/connections/import': {
      connections: [
        { conn_id: 'imported_conn', connection: { conn_type: 'http', host: 'example.invalid' } },
      ],
    },
    'POST /api/v1/tokens': { role: 'viewer' },
    'POST /api/v1/tenants': { id: `t-${Math.random().toString(36).slice(2, 8)}` },
    'POST /api/v1/tenants/:tenant_id/tokens': { role: 'viewer' },
    'POST /api/v1/runners': {
      name: `r-${Math.random().toString(36).slice(2, 8)}`,
      kind: 'inbound',
    },
    'POST /api/v1/runners/:name/reveal-token': undefined,
    'POST /api/v1/cells': {
      name: `c-${Math.random().toString(36).slice(2, 8)}`,
      url: 'http://127.0.0.1:1',
    },
    'POST /api/v1/cells/:cell/drain': undefined,
    'PUT /api/v1/tenants/:tenant_id/placement': { cell: SEEDED_CELL },
    'POST /api/v1/secrets/rotate-key': {},
    'POST /api/v1/auth/signing-keys/rotate': {},
  };
  return bodies[key];
}
