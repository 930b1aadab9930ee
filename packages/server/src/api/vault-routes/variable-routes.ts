import type { FastifyInstance } from 'fastify';
import { isSensitiveKey } from '@leoflow/core';
import { auditRequest } from '../audit.js';
import { requirePermission } from '../authz.js';
import { listReply, nextOffset, pageQuery, stdErrors, paramsOf } from '../schemas.js';
import { type VaultRouteDeps, variableSchema, variableOut, ID, notFound } from './vault-shared.js';
import { typedApi } from '../typed-routes.js';

/** One Variable at a time: list (secret values masked), read (reveal audited), set, delete. */
export function registerVariableRoutes(app: FastifyInstance, deps: VaultRouteDeps): void {
  const api = typedApi(app);
  const { clock } = deps;
  api.get(
    '/api/v1/variables',
    {
      schema: {
        summary: 'List Variables (secret values masked)',
        querystring: { type: 'object', properties: pageQuery, additionalProperties: false },
        response: { 200: listReply('variables', variableSchema), ...stdErrors },
      },
    },
    async (req) => {
      const q = req.query;
      const list = await req.scope.vault.listVariables(q);
      return {
        next_offset: nextOffset(list.length, q),
        variables: list.map((v) => variableOut(v, { reveal: false })),
      };
    },
  );

  api.get(
    '/api/v1/variables/:key',
    {
      schema: {
        summary: 'One Variable; ?reveal=true shows a secret value (variables:reveal; audited)',
        params: paramsOf('key'),
        querystring: {
          type: 'object',
          properties: { reveal: { type: 'boolean', default: false } },
          additionalProperties: false,
        },
        response: { 200: variableSchema, ...stdErrors },
      },
    },
    async (req) => {
      const { key } = req.params;
      const { reveal } = req.query;
      const v = await req.scope.vault.getVariable(key);
      if (!v) throw notFound('variable', key, 'leoflow variables list');
      const sensitive = v.is_secret || isSensitiveKey(v.key);
      if (reveal && sensitive) {
        await requirePermission(req, 'variables:reveal');
        await auditRequest(req, 'variable.reveal', { type: 'variable', id: key });
      }
      return variableOut(v, { reveal });
    },
  );

  api.put(
    '/api/v1/variables/:key',
    {
      schema: {
        summary: 'Create or replace a Variable (sensitive-looking keys are stored sealed)',
        params: {
          type: 'object',
          required: ['key'],
          properties: { key: { type: 'string', pattern: ID } },
        },
        body: {
          type: 'object',
          required: ['value'],
          properties: {
            value: { type: 'string', maxLength: 1_048_576 },
            secret: { type: 'boolean' },
            description: { type: 'string', maxLength: 2000 },
          },
          additionalProperties: false,
        },
        response: { 200: variableSchema, ...stdErrors },
      },
    },
    async (req) => {
      const { key } = req.params;
      const body = req.body;
      // A key that looks sensitive is stored sealed even when the caller did not say so.
      const secret = body.secret ?? isSensitiveKey(key);
      const now = clock.now();
      await req.scope.vault.setVariable(
        key,
        body.value,
        { secret, description: body.description ?? '' },
        now,
      );
      await auditRequest(req, 'variable.set', { type: 'variable', id: key }, { secret });
      const stored = { key, value: body.value, is_secret: secret, updated_at: now };
      return variableOut({ ...stored, description: body.description ?? '' }, { reveal: false });
    },
  );

  api.delete(
    '/api/v1/variables/:key',
    {
      schema: {
        summary: 'Delete a Variable; tasks that declared it stop receiving it',
        params: paramsOf('key'),
        response: { 204: { type: 'null' }, ...stdErrors },
      },
    },
    async (req, reply) => {
      const { key } = req.params;
      if (!(await req.scope.vault.deleteVariable(key)))
        throw notFound('variable', key, 'leoflow variables list');
      await auditRequest(req, 'variable.delete', { type: 'variable', id: key });
      return reply.status(204).send();
    },
  );
}
