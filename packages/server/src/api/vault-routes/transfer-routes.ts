import type { FastifyInstance } from 'fastify';
import { isSensitiveKey } from '@leoflow/core';
import { auditRequest } from '../audit.js';

import { stdErrors } from '../schemas.js';
import {
  type VaultRouteDeps,
  revealedConnectionSchema,
  connectionBody,
  ID,
  connectionFromBody,
} from './vault-shared.js';
import { typedApi } from '../typed-routes.js';

/** Variables and Connections in bulk: import (Airflow's export formats) and export (audited). */
export function registerVaultTransferRoutes(app: FastifyInstance, deps: VaultRouteDeps): void {
  const api = typedApi(app);
  const { clock } = deps;
  api.post(
    '/api/v1/variables/import',
    {
      schema: {
        summary: 'Import Variables (`airflow variables export` content)',
        body: {
          type: 'object',
          required: ['variables'],
          properties: {
            variables: {
              type: 'array',
              maxItems: 10_000,
              items: {
                type: 'object',
                required: ['key', 'value'],
                properties: {
                  key: { type: 'string', pattern: ID },
                  value: { type: 'string' },
                  secret: { type: 'boolean' },
                },
                additionalProperties: false,
              },
            },
          },
          additionalProperties: false,
        },
        response: {
          200: { type: 'object', properties: { imported: { type: 'integer' } } },
          ...stdErrors,
        },
      },
    },
    async (req) => {
      const { variables } = req.body;
      const now = clock.now();
      for (const v of variables) {
        await req.scope.vault.setVariable(
          v.key,
          v.value,
          { secret: v.secret ?? isSensitiveKey(v.key), description: '' },
          now,
        );
      }
      await auditRequest(
        req,
        'variable.import',
        { type: 'variable', id: '*' },
        { count: variables.length },
      );
      return { imported: variables.length };
    },
  );

  api.post(
    '/api/v1/variables/export',
    {
      schema: {
        summary: 'Every Variable with its value, for `airflow variables import` (audited)',
        response: {
          200: {
            type: 'object',
            properties: { variables: { type: 'object', additionalProperties: { type: 'string' } } },
          },
          ...stdErrors,
        },
      },
    },
    async (req) => {
      const all = await req.scope.vault.resolveVariables('all');
      await auditRequest(
        req,
        'variable.export',
        { type: 'variable', id: '*' },
        { count: all.size },
      );
      return { variables: Object.fromEntries(all) };
    },
  );

  registerConnectionTransferRoutes(app, deps);
}

/** Connections in bulk: import (Airflow's JSON export) and export (audited). */
function registerConnectionTransferRoutes(app: FastifyInstance, deps: VaultRouteDeps): void {
  const api = typedApi(app);
  const { clock } = deps;
  api.post(
    '/api/v1/connections/import',
    {
      schema: {
        summary: 'Import Connections (`airflow connections export` content)',
        body: {
          type: 'object',
          required: ['connections'],
          properties: {
            connections: {
              type: 'array',
              maxItems: 10_000,
              items: {
                type: 'object',
                required: ['conn_id', 'connection'],
                properties: {
                  conn_id: { type: 'string', pattern: ID },
                  connection: connectionBody.properties.connection,
                },
                additionalProperties: false,
              },
            },
          },
          additionalProperties: false,
        },
        response: {
          200: { type: 'object', properties: { imported: { type: 'integer' } } },
          ...stdErrors,
        },
      },
    },
    async (req) => {
      const { connections } = req.body;
      const now = clock.now();
      for (const c of connections) {
        await req.scope.vault.setConnection(
          c.conn_id,
          connectionFromBody({ connection: c.connection }),
          '',
          now,
        );
      }
      await auditRequest(
        req,
        'connection.import',
        { type: 'connection', id: '*' },
        { count: connections.length },
      );
      return { imported: connections.length };
    },
  );

  api.post(
    '/api/v1/connections/export',
    {
      schema: {
        summary: 'Every Connection with its secrets, as Airflow JSON (audited)',
        response: {
          200: {
            type: 'object',
            properties: {
              connections: {
                type: 'object',
                additionalProperties: revealedConnectionSchema.properties.connection,
              },
            },
          },
          ...stdErrors,
        },
      },
    },
    async (req) => {
      const all = await req.scope.vault.resolveConnections('all');
      await auditRequest(
        req,
        'connection.export',
        { type: 'connection', id: '*' },
        { count: all.size },
      );
      return { connections: Object.fromEntries(all) };
    },
  );
}
