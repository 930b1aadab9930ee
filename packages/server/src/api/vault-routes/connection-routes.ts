import type { FastifyInstance } from 'fastify';
import { checkConnectionStructure, formatConnectionUri } from '@leoflow/core';
import { auditRequest } from '../audit.js';

import { listReply, nextOffset, pageQuery, stdErrors, paramsOf } from '../schemas.js';
import {
  type VaultRouteDeps,
  connectionSchema,
  revealedConnectionSchema,
  connectionBody,
  ID,
  connectionFromBody,
  publicConnection,
  notFound,
} from './vault-shared.js';
import { typedApi } from '../typed-routes.js';

/** One Connection at a time: list and read (metadata only), reveal (audited), set, delete, test. */
export function registerConnectionRoutes(app: FastifyInstance, deps: VaultRouteDeps): void {
  const api = typedApi(app);
  api.get(
    '/api/v1/connections',
    {
      schema: {
        summary: 'List Connections (metadata only, never a password)',
        querystring: { type: 'object', properties: pageQuery, additionalProperties: false },
        response: { 200: listReply('connections', connectionSchema), ...stdErrors },
      },
    },
    async (req) => {
      const q = req.query;
      const list = await req.scope.vault.listConnections(q);
      return {
        next_offset: nextOffset(list.length, q),
        connections: list.map((c) => ({
          conn_id: c.conn_id,
          conn_type: c.conn_type,
          host: c.host,
          login: c.login,
          schema: c.schema,
          port: c.port,
          description: c.description,
          has_password: c.has_secret,
          extra: null,
          grants: c.grants,
          updated_at: new Date(c.updated_at).toISOString(),
        })),
      };
    },
  );

  api.get(
    '/api/v1/connections/:id',
    {
      schema: {
        summary:
          'One Connection (password never included; extra values masked but for a few non-secret fields)',
        params: paramsOf('id'),
        response: { 200: connectionSchema, ...stdErrors },
      },
    },
    async (req) => {
      const { id } = req.params;
      const c = await req.scope.vault.getConnection(id);
      if (!c) throw notFound('connection', id, 'leoflow connections list');
      return { ...publicConnection(id, c.conn, c.description, c.updated_at), grants: c.grants };
    },
  );

  api.post(
    '/api/v1/connections/:id/reveal',
    {
      schema: {
        summary: 'One Connection with its secrets and URI (connections:reveal; audited)',
        params: paramsOf('id'),
        response: { 200: revealedConnectionSchema, ...stdErrors },
      },
    },
    async (req) => {
      const { id } = req.params;
      const c = await req.scope.vault.getConnection(id);
      if (!c) throw notFound('connection', id, 'leoflow connections list');
      await auditRequest(req, 'connection.reveal', { type: 'connection', id });
      return { conn_id: id, uri: formatConnectionUri(c.conn), connection: c.conn };
    },
  );

  registerConnectionWriteRoutes(app, deps);
}

/** Set, delete and test a Connection. */
function registerConnectionWriteRoutes(app: FastifyInstance, deps: VaultRouteDeps): void {
  const api = typedApi(app);
  const { clock } = deps;
  api.put(
    '/api/v1/connections/:id',
    {
      schema: {
        summary: 'Create or replace a Connection from a URI, Airflow JSON or fields',
        params: {
          type: 'object',
          required: ['id'],
          properties: { id: { type: 'string', pattern: ID } },
        },
        body: connectionBody,
        response: { 200: connectionSchema, ...stdErrors },
      },
    },
    async (req) => {
      const { id } = req.params;
      const body = req.body;
      const conn = connectionFromBody(body);
      const now = clock.now();
      await req.scope.vault.setConnection(id, conn, body.description ?? '', now);
      await auditRequest(
        req,
        'connection.set',
        { type: 'connection', id },
        { conn_type: conn.conn_type },
      );
      return publicConnection(id, conn, body.description ?? '', now);
    },
  );

  api.delete(
    '/api/v1/connections/:id',
    {
      schema: {
        summary: 'Delete a Connection; tasks that declared it stop receiving it',
        params: paramsOf('id'),
        response: { 204: { type: 'null' }, ...stdErrors },
      },
    },
    async (req, reply) => {
      const { id } = req.params;
      if (!(await req.scope.vault.deleteConnection(id)))
        throw notFound('connection', id, 'leoflow connections list');
      await auditRequest(req, 'connection.delete', { type: 'connection', id });
      return reply.status(204).send();
    },
  );

  api.post(
    '/api/v1/connections/:id/test',
    {
      schema: {
        summary: 'Structural checks of a Connection (no network call from the control plane)',
        params: paramsOf('id'),
        response: {
          200: {
            type: 'object',
            properties: {
              conn_id: { type: 'string' },
              ok: { type: 'boolean' },
              checks: {
                type: 'array',
                items: {
                  type: 'object',
                  properties: {
                    name: { type: 'string' },
                    ok: { type: 'boolean' },
                    message: { type: 'string' },
                  },
                },
              },
            },
          },
          ...stdErrors,
        },
      },
    },
    async (req) => {
      const { id } = req.params;
      const c = await req.scope.vault.getConnection(id);
      if (!c) throw notFound('connection', id, 'leoflow connections list');
      const result = checkConnectionStructure(c.conn);
      await auditRequest(req, 'connection.test', { type: 'connection', id }, { ok: result.ok });
      return { conn_id: id, ...result };
    },
  );
}
