import type { FastifyInstance } from 'fastify';
import { auditRequest } from './audit.js';
import { paramsOf, stdErrors } from './schemas.js';
import { typedApi, type TypedApi } from './typed-routes.js';

/**
 * Secret grants (issue 34): which DAGs may declare a Variable or a Connection. Reading them needs
 * the secret kind's read permission (patterns and DAG ids, never a value); changing them needs
 * `variables:grant` / `connections:grant` (admin: granting a secret to a DAG lets whoever may
 * push that DAG read it). Every change is audited with the old and new patterns and the DAGs
 * that lost it.
 */
const grantsValue = {
  type: ['array', 'null'],
  items: { type: 'string' },
  description:
    'DAG id patterns (anchored, case-sensitive; * and ? wildcards) that may declare it; null: every DAG of the tenant; []: none',
} as const;

const declaredBy = {
  type: 'array',
  description:
    'registered DAGs whose current version declares it, and whether the grants name them',
  items: {
    type: 'object',
    required: ['dag_id', 'granted'],
    properties: { dag_id: { type: 'string' }, granted: { type: 'boolean' } },
  },
} as const;

const grantsView = {
  type: 'object',
  required: ['name', 'grants', 'declared_by'],
  properties: { name: { type: 'string' }, grants: grantsValue, declared_by: declaredBy },
} as const;

const grantChange = {
  type: 'object',
  required: ['name', 'grants', 'previous', 'applied', 'losing', 'gaining', 'declared_by'],
  properties: {
    name: { type: 'string' },
    grants: grantsValue,
    previous: grantsValue,
    applied: { type: 'boolean', description: 'false for a dry run: nothing was written' },
    losing: {
      type: 'array',
      items: { type: 'string' },
      description:
        'registered DAGs that declare it and lose it with this change: delivery to them then refuses it (LF_SECRET_NOT_GRANTED) and their tasks fail with that sentence',
    },
    gaining: { type: 'array', items: { type: 'string' } },
    declared_by: declaredBy,
  },
} as const;

const grantBody = {
  type: 'object',
  required: ['grants'],
  properties: {
    grants: { type: ['array', 'null'], items: { type: 'string' }, maxItems: 100 },
    dry_run: { type: 'boolean', default: false },
  },
  additionalProperties: false,
} as const;

export function registerGrantRoutes(app: FastifyInstance): void {
  const api = typedApi(app);
  registerGrantRoutesOf(api, 'variables', '/api/v1/variables/:key/grants', 'key', 'variable');
  registerGrantRoutesOf(api, 'connections', '/api/v1/connections/:id/grants', 'id', 'connection');
}

/** GET and PUT of one kind's grants (the path parameter is `key` or `id`, as the secret's own routes name it). */
function registerGrantRoutesOf(
  api: TypedApi,
  kind: 'variables' | 'connections',
  path: string,
  param: 'key' | 'id',
  noun: string,
): void {
  api.get(
    path,
    {
      schema: {
        summary: `Which DAGs may declare a ${noun}, and which registered DAGs declare it`,
        params: paramsOf<string>(param),
        response: { 200: grantsView, ...stdErrors },
      },
    },
    async (req) => {
      // the schema requires the parameter, so it is there
      const name = req.params[param]!;
      const v = await req.scope.secretGrants(kind, name);
      return { name: v.name, grants: v.grants, declared_by: v.declared_by };
    },
  );

  api.put(
    path,
    {
      schema: {
        summary: `Replace the DAG id patterns that may declare a ${noun}; the answer lists the registered DAGs that lose it (dry_run: preview, nothing written)`,
        params: paramsOf<string>(param),
        body: grantBody,
        response: { 200: grantChange, ...stdErrors },
      },
    },
    async (req) => {
      // the schema requires the parameter, so it is there
      const name = req.params[param]!;
      const body = req.body;
      const change = await req.scope.setSecretGrants(kind, name, body.grants, body.dry_run);
      if (change.applied) {
        await auditRequest(
          req,
          `${noun}.grants`,
          { type: noun, id: name },
          { grants: change.grants, previous: change.previous, losing: change.losing },
        );
      }
      const { kind: _kind, ...reply } = change;
      return reply;
    },
  );
}
