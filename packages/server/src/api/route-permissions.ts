import type { Permission } from '@leoflow/core';

/** Reachable without a token. */
export const PUBLIC = 'public';
/** Any valid token of any role (e.g. "who am I"). */
export const AUTHENTICATED = 'authenticated';

export type RouteAccess = Permission | typeof PUBLIC | typeof AUTHENTICATED;

/**
 * The one table that says what each route needs. buildApi refuses to register a route missing
 * from it, and the authorization test is generated from it (every role × every route), so a new
 * route cannot ship without a decision here.
 */
export const ROUTE_PERMISSIONS: Readonly<Record<string, RouteAccess>> = {
  'GET /api/v1/health': PUBLIC,
  // Kubernetes probes (api/probes/probe-routes.ts): no token, and they reveal nothing but state.
  'GET /healthz': PUBLIC,
  'GET /readyz': PUBLIC,
  'GET /api/v1/openapi.json': PUBLIC,
  'GET /api/v1/docs': PUBLIC,

  'GET /api/v1/whoami': AUTHENTICATED,
  'GET /api/v1/roles': AUTHENTICATED,

  'GET /api/v1/dags': 'dags:read',
  'POST /api/v1/dags': 'dags:push',
  'GET /api/v1/dags/:dag_id': 'dags:read',
  'PATCH /api/v1/dags/:dag_id': 'dags:pause',
  'GET /api/v1/dags/:dag_id/versions': 'dags:read',
  'GET /api/v1/dags/:dag_id/versions/:version': 'dags:read',
  // the DAGs folder's files that do not load (issue 40): file:line:column, code, hint
  'GET /api/v1/import-errors': 'dags:read',

  'POST /api/v1/dags/:dag_id/runs': 'runs:trigger',
  'GET /api/v1/runs': 'runs:read',
  // the grid in one request: the newest runs of a DAG with their task instances
  'GET /api/v1/dags/:dag_id/grid': 'runs:read',
  'GET /api/v1/dags/:dag_id/runs/:run_id': 'runs:read',
  'POST /api/v1/dags/:dag_id/runs/:run_id/clear': 'runs:clear',
  // mark success / failed: stops a marked task's live attempt and revokes its credential
  'POST /api/v1/dags/:dag_id/runs/:run_id/mark': 'runs:mark',
  'GET /api/v1/dags/:dag_id/runs/:run_id/tasks': 'runs:read',
  'GET /api/v1/dags/:dag_id/runs/:run_id/tasks/:task_id': 'runs:read',
  'GET /api/v1/dags/:dag_id/runs/:run_id/tasks/:task_id/logs': 'logs:read',
  'GET /api/v1/dags/:dag_id/runs/:run_id/tasks/:task_id/mapped': 'runs:read',
  'GET /api/v1/dags/:dag_id/runs/:run_id/tasks/:task_id/xcom': 'xcom:read',
  'POST /api/v1/dags/:dag_id/runs/:run_id/tasks/:task_id/revoke-credential': 'credentials:revoke',
  // names delivered (never values), modes, refusals, renewals: what a run page shows
  'GET /api/v1/dags/:dag_id/runs/:run_id/tasks/:task_id/delivery': 'runs:read',
  // D5: what enforce would break, per DAG (derived from the audited undeclared reads)
  'GET /api/v1/secrets/undeclared-use': 'audit:read',

  'GET /api/v1/variables': 'variables:read',
  // ?reveal=true on a secret additionally needs variables:reveal (checked in the handler).
  'GET /api/v1/variables/:key': 'variables:read',
  'PUT /api/v1/variables/:key': 'variables:write',
  'DELETE /api/v1/variables/:key': 'variables:write',
  'POST /api/v1/variables/import': 'variables:write',
  'POST /api/v1/variables/export': 'variables:reveal',
  // which DAGs may declare it (issue 34): reading shows patterns and DAG ids, never a value;
  // changing them is as strong as revealing (a granted DAG's author can read the value)
  'GET /api/v1/variables/:key/grants': 'variables:read',
  'PUT /api/v1/variables/:key/grants': 'variables:grant',

  'GET /api/v1/connections': 'connections:read',
  'GET /api/v1/connections/:id': 'connections:read',
  'POST /api/v1/connections/:id/reveal': 'connections:reveal',
  'PUT /api/v1/connections/:id': 'connections:write',
  'DELETE /api/v1/connections/:id': 'connections:write',
  'POST /api/v1/connections/:id/test': 'connections:test',
  'POST /api/v1/connections/import': 'connections:write',
  'POST /api/v1/connections/export': 'connections:reveal',
  'GET /api/v1/connections/:id/grants': 'connections:read',
  'PUT /api/v1/connections/:id/grants': 'connections:grant',

  'GET /api/v1/audit': 'audit:read',

  'GET /api/v1/runners': 'runners:read',
  'POST /api/v1/runners': 'runners:create',
  'GET /api/v1/runners/:name': 'runners:read',
  // the token again: only a caller who could register the runner may read it (audited)
  'POST /api/v1/runners/:name/reveal-token': 'runners:create',
  'DELETE /api/v1/runners/:name': 'runners:delete',

  'GET /api/v1/tokens': 'tokens:read',
  'POST /api/v1/tokens': 'tokens:create',
  'DELETE /api/v1/tokens/:jti': 'tokens:revoke',

  'GET /api/v1/cells': 'tenants:admin',
  'POST /api/v1/cells': 'tenants:admin',
  'PUT /api/v1/tenants/:tenant_id/placement': 'tenants:admin',
  'POST /api/v1/cells/:cell/drain': 'tenants:admin',

  'GET /api/v1/tenants': 'tenants:admin',
  'POST /api/v1/tenants': 'tenants:admin',
  'POST /api/v1/tenants/:tenant_id/tokens': 'tenants:admin',

  'POST /api/v1/secrets/rotate-key': 'secrets:rotate-key',
  'POST /api/v1/auth/signing-keys/rotate': 'signing-keys:rotate',
  'GET /api/v1/doctor': 'doctor:read',
};

export function routeKey(method: string, url: string): string {
  return `${method.toUpperCase()} ${url}`;
}
