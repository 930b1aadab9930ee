import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AuthError } from '@leoflow/core';
import type { CellAdmin, CellView } from '../runners/cells/cell-admin.js';
import type { RunnerRegistry, RunnerView } from '../runners/runner-registry.js';

import { actorOf, auditRequest } from './audit.js';
import { listReply, nextOffset, pageQuery, paramsOf, stdErrors } from './schemas.js';
import { iso } from './serialize.js';
import { typedApi } from './typed-routes.js';

export interface RunnerRouteDeps {
  runners: RunnerRegistry;
  cells: CellAdmin;
}

const nullableString = { type: ['string', 'null'] } as const;

/**
 * A runner as every read shows it. Reply schemas emit only declared fields, so the token (and
 * its hash and ciphertext) cannot leak through here even if a row carried them.
 */
const runnerSchema = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    name: { type: 'string' },
    kind: { type: 'string', enum: ['inbound', 'ssh'] },
    labels: { type: 'object', additionalProperties: { type: 'string' } },
    capacity: { type: 'integer' },
    ssh: {
      type: ['object', 'null'],
      properties: {
        host: { type: 'string' },
        port: { type: 'integer' },
        user: { type: 'string' },
        credential: { type: 'string' },
        host_key: { type: 'string' },
      },
    },
    has_token: { type: 'boolean' },
    created_by: { type: 'string' },
    created_at: nullableString,
  },
} as const;

const tokenProperties = {
  token: { type: 'string' },
  door_url: nullableString,
  launch_command: nullableString,
} as const;

/** Only the registration reply and the reveal carry the token. */
const registeredSchema = {
  type: 'object',
  properties: {
    runner: runnerSchema,
    token: nullableString,
    door_url: nullableString,
    launch_command: nullableString,
  },
} as const;

const revealedSchema = {
  type: 'object',
  properties: { name: { type: 'string' }, ...tokenProperties },
} as const;

const cellSchema = {
  type: 'object',
  properties: {
    name: { type: 'string' },
    url: { type: 'string' },
    state: { type: 'string' },
    tenants: { type: 'integer' },
    implicit: { type: 'boolean' },
    created_at: nullableString,
    updated_at: nullableString,
  },
} as const;

const placementSchema = {
  type: 'object',
  properties: {
    tenant_id: { type: 'string' },
    cell: { type: 'string' },
    placed_by: { type: 'string' },
    placed_at: nullableString,
  },
} as const;

const NAME_PATTERN = '^[a-z0-9][a-z0-9._-]{0,62}$';

const registerBody = {
  type: 'object',
  required: ['name', 'kind'],
  properties: {
    name: { type: 'string', pattern: NAME_PATTERN },
    kind: { type: 'string', enum: ['inbound', 'ssh'] },
    labels: { type: 'object', additionalProperties: { type: 'string', maxLength: 63 } },
    capacity: { type: 'integer', minimum: 1, maximum: 1024 },
    ssh: {
      type: 'object',
      required: ['host', 'user', 'credential', 'host_key'],
      properties: {
        host: { type: 'string', minLength: 1, maxLength: 253 },
        port: { type: 'integer', minimum: 1, maximum: 65535 },
        user: { type: 'string', minLength: 1, maxLength: 32 },
        credential: { type: 'string', minLength: 1, maxLength: 250 },
        host_key: { type: 'string', minLength: 1, maxLength: 16384 },
      },
      additionalProperties: false,
    },
  },
  additionalProperties: false,
} as const;

function runnerOut(r: RunnerView) {
  return { ...r, created_at: iso(r.created_at) };
}

function cellOut(c: CellView) {
  return {
    name: c.name,
    url: c.url,
    state: c.state,
    tenants: c.tenants,
    implicit: c.implicit,
    created_at: c.implicit ? null : iso(c.created_at),
    updated_at: c.implicit ? null : iso(c.updated_at),
  };
}

export function registerRunnerRoutes(app: FastifyInstance, deps: RunnerRouteDeps): void {
  const api = typedApi(app);
  const { runners } = deps;
  const tenantOf = (req: FastifyRequest) => req.scope.tenantId;

  api.get(
    '/api/v1/runners',
    {
      schema: {
        summary: "The tenant's runners (never their tokens)",
        querystring: { type: 'object', properties: pageQuery, additionalProperties: false },
        response: { 200: listReply('runners', runnerSchema), ...stdErrors },
      },
    },
    async (req) => {
      const q = req.query;
      const rows = await runners.list(tenantOf(req), q);
      return { runners: rows.map(runnerOut), next_offset: nextOffset(rows.length, q) };
    },
  );

  api.post(
    '/api/v1/runners',
    {
      schema: {
        summary: 'Register a runner; an inbound one gets its token and launch command here',
        body: registerBody,
        response: { 201: registeredSchema, ...stdErrors },
      },
    },
    async (req, reply) => {
      const body = req.body;
      const { runner, token } = await runners.register(tenantOf(req), body, actorOf(req));
      await auditRequest(
        req,
        'runner.register',
        { type: 'runner', id: runner.name },
        { kind: runner.kind, runner_id: runner.id, capacity: runner.capacity },
      );
      return reply.status(201).send({
        runner: runnerOut(runner),
        token: token?.token ?? null,
        door_url: token?.door_url ?? null,
        launch_command: token?.launch_command ?? null,
      });
    },
  );

  api.get(
    '/api/v1/runners/:name',
    {
      schema: {
        summary: 'One runner (never its token; reading that needs runners:create)',
        params: paramsOf('name'),
        response: { 200: runnerSchema, ...stdErrors },
      },
    },
    async (req) => runnerOut(await runners.get(tenantOf(req), req.params.name)),
  );

  api.post(
    '/api/v1/runners/:name/reveal-token',
    {
      schema: {
        summary: "An inbound runner's token and launch command again (runners:create; audited)",
        params: paramsOf('name'),
        response: { 200: revealedSchema, ...stdErrors },
      },
    },
    async (req) => {
      const { name } = req.params;
      const t = await runners.revealToken(tenantOf(req), name);
      await auditRequest(req, 'runner.token_read', { type: 'runner', id: name });
      return { name, ...t };
    },
  );

  api.delete(
    '/api/v1/runners/:name',
    {
      schema: {
        summary: 'Delete a runner: its token stops resolving and its live sessions close',
        params: paramsOf('name'),
        response: { 200: runnerSchema, ...stdErrors },
      },
    },
    async (req) => {
      const gone = await runners.delete(tenantOf(req), req.params.name);
      await auditRequest(
        req,
        'runner.delete',
        { type: 'runner', id: gone.name },
        { kind: gone.kind, runner_id: gone.id },
      );
      return runnerOut(gone);
    },
  );

  registerCellRoutes(app, deps);
}

/** Cells (platform): list, create, drain, and a tenant's placement. */
function registerCellRoutes(app: FastifyInstance, deps: RunnerRouteDeps): void {
  const api = typedApi(app);
  const { cells } = deps;
  // ---- platform: cells and placements ----
  api.get(
    '/api/v1/cells',
    {
      schema: {
        summary: 'Every cell and how many tenants it holds (platform admins only)',
        response: {
          200: {
            type: 'object',
            properties: { cells: { type: 'array', items: cellSchema } },
          },
          ...stdErrors,
        },
      },
    },
    async () => ({ cells: (await cells.list()).map(cellOut) }),
  );

  api.post(
    '/api/v1/cells',
    {
      schema: {
        summary: 'Add a cell to the directory (platform admins only)',
        body: {
          type: 'object',
          required: ['name', 'url'],
          properties: {
            name: { type: 'string', minLength: 1, maxLength: 63 },
            url: { type: 'string', minLength: 1, maxLength: 2048 },
          },
          additionalProperties: false,
        },
        response: { 201: cellSchema, ...stdErrors },
      },
    },
    async (req, reply) => {
      const body = req.body;
      const cell = await cells.add(body.name, body.url);
      await auditRequest(req, 'cell.add', { type: 'cell', id: cell.name });
      return reply.status(201).send(cellOut(cell));
    },
  );

  api.post(
    '/api/v1/cells/:cell/drain',
    {
      schema: {
        summary: 'Drain a cell: it takes no new placements (platform admins only)',
        params: paramsOf('cell'),
        response: { 200: cellSchema, ...stdErrors },
      },
    },
    async (req) => {
      const cell = await cells.drain(req.params.cell);
      await auditRequest(req, 'cell.drain', { type: 'cell', id: cell.name });
      return cellOut(cell);
    },
  );

  api.put(
    '/api/v1/tenants/:tenant_id/placement',
    {
      schema: {
        summary:
          "Place a tenant on a cell: its runners' next sessions go there (platform admins only)",
        params: paramsOf('tenant_id'),
        body: {
          type: 'object',
          required: ['cell'],
          properties: { cell: { type: 'string', minLength: 1, maxLength: 63 } },
          additionalProperties: false,
        },
        response: { 200: placementSchema, ...stdErrors },
      },
    },
    async (req) => {
      const { tenant_id } = req.params;
      if (!/^[a-z0-9][a-z0-9-]{0,62}$/.test(tenant_id)) {
        throw new AuthError('LF_TENANT_ID_INVALID', `tenant id "${tenant_id}" is not a tenant id`);
      }
      const p = await cells.place(tenant_id, req.body.cell, actorOf(req));
      await auditRequest(req, 'tenant.place', { type: 'tenant', id: tenant_id }, { cell: p.cell });
      return { ...p, placed_at: iso(p.placed_at) };
    },
  );
}
