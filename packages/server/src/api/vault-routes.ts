import type { FastifyInstance } from 'fastify';
import {
  assertJsonDepth,
  checkConnectionStructure,
  formatConnectionUri,
  isSensitiveKey,
  parseConnectionJson,
  parseConnectionUri,
  redactConnectionExtra,
  requireConnType,
  VaultError,
  type Clock,
  type Connection,
} from '@leoflow/core';
import { auditRequest } from './audit.js';
import { requirePermission } from './authz.js';
import { listReply, nextOffset, pageQuery, stdErrors } from './schemas.js';

export interface VaultRouteDeps {
  clock: Clock;
}

const MASK = '***';
const nullableString = { type: ['string', 'null'] } as const;

const variableSchema = {
  type: 'object',
  properties: {
    key: { type: 'string' },
    value: nullableString,
    is_secret: { type: 'boolean' },
    masked: { type: 'boolean' },
    description: { type: 'string' },
    grants: {
      type: ['array', 'null'],
      items: { type: 'string' },
      description: 'DAG id patterns that may declare it; null: every DAG (GET …/grants)',
    },
    updated_at: { type: 'string' },
  },
} as const;

/**
 * Replies never carry a password: only `has_password`, and an extra in which every value is
 * masked unless its field is on NON_SECRET_EXTRA_FIELDS (default-deny; redactConnectionExtra).
 */
const connectionSchema = {
  type: 'object',
  properties: {
    conn_id: { type: 'string' },
    conn_type: { type: 'string' },
    host: nullableString,
    login: nullableString,
    schema: nullableString,
    port: { type: ['integer', 'null'] },
    description: { type: 'string' },
    has_password: { type: 'boolean' },
    extra: { type: ['object', 'null'], additionalProperties: true },
    grants: {
      type: ['array', 'null'],
      items: { type: 'string' },
      description: 'DAG id patterns that may declare it; null: every DAG (GET …/grants)',
    },
    updated_at: { type: 'string' },
  },
} as const;

/** Only for the explicit, audited reveal route. */
const revealedConnectionSchema = {
  type: 'object',
  properties: {
    conn_id: { type: 'string' },
    uri: { type: 'string' },
    connection: {
      type: 'object',
      properties: {
        conn_type: { type: 'string' },
        host: nullableString,
        login: nullableString,
        password: nullableString,
        schema: nullableString,
        port: { type: ['integer', 'null'] },
        extra: { type: ['object', 'null'], additionalProperties: true },
      },
    },
  },
} as const;

const connectionBody = {
  type: 'object',
  properties: {
    uri: { type: 'string', minLength: 1 },
    json: { type: 'string', minLength: 1 },
    connection: {
      type: 'object',
      required: ['conn_type'],
      properties: {
        conn_type: { type: 'string', minLength: 1 },
        host: nullableString,
        login: nullableString,
        password: nullableString,
        schema: nullableString,
        port: { type: ['integer', 'null'], minimum: 0, maximum: 65535 },
        extra: { type: ['object', 'null'], additionalProperties: true },
      },
      additionalProperties: false,
    },
    description: { type: 'string', maxLength: 2000 },
  },
  additionalProperties: false,
} as const;

const ID = '^[A-Za-z0-9_][A-Za-z0-9_.-]{0,249}$';

interface ConnectionBody {
  uri?: string;
  json?: string;
  connection?: Partial<Connection> & { conn_type: string };
  description?: string;
}

export function connectionFromBody(body: ConnectionBody): Connection {
  const given = [body.uri, body.json, body.connection].filter((v) => v !== undefined).length;
  if (given !== 1) {
    throw new VaultError(
      'LF_CONN_BODY_INVALID',
      'give exactly one of uri, json or connection (e.g. --uri postgres://user:pass@host:5432/db)',
    );
  }
  if (body.uri !== undefined) return parseConnectionUri(body.uri);
  if (body.json !== undefined) {
    assertJsonDepth(body.json, 'the connection JSON');
    return requireConnType(parseConnectionJson(body.json));
  }
  const c = body.connection!;
  return {
    conn_type: c.conn_type,
    host: c.host ?? null,
    login: c.login ?? null,
    password: c.password ?? null,
    schema: c.schema ?? null,
    port: c.port ?? null,
    extra: c.extra ?? null,
  };
}

function publicConnection(id: string, conn: Connection, description: string, updatedAt: number) {
  return {
    conn_id: id,
    conn_type: conn.conn_type,
    host: conn.host,
    login: conn.login,
    schema: conn.schema,
    port: conn.port,
    description,
    has_password: conn.password !== null && conn.password !== '',
    extra: conn.extra === null ? null : redactConnectionExtra(conn.extra),
    updated_at: new Date(updatedAt).toISOString(),
  };
}

export function registerVaultRoutes(api: FastifyInstance, deps: VaultRouteDeps): void {
  const { clock } = deps;

  // ---- variables ----
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
      const q = req.query as { limit: number; offset: number };
      const list = await req.scope.vault.listVariables(q);
      return {
        next_offset: nextOffset(list.length, q),
        variables: list.map((v) => {
          const masked = v.is_secret || isSensitiveKey(v.key);
          return {
            key: v.key,
            value: masked ? MASK : v.value,
            is_secret: v.is_secret,
            masked,
            description: v.description,
            grants: v.grants,
            updated_at: new Date(v.updated_at).toISOString(),
          };
        }),
      };
    },
  );

  api.get(
    '/api/v1/variables/:key',
    {
      schema: {
        summary: 'One Variable; ?reveal=true shows a secret value (variables:reveal; audited)',
        querystring: {
          type: 'object',
          properties: { reveal: { type: 'boolean', default: false } },
          additionalProperties: false,
        },
        response: { 200: variableSchema, ...stdErrors },
      },
    },
    async (req) => {
      const { key } = req.params as { key: string };
      const { reveal } = req.query as { reveal: boolean };
      const v = await req.scope.vault.getVariable(key);
      if (!v) throw notFound('variable', key, 'leoflow variables list');
      const sensitive = v.is_secret || isSensitiveKey(v.key);
      if (reveal && sensitive) {
        await requirePermission(req, 'variables:reveal');
        await auditRequest(req, 'variable.reveal', { type: 'variable', id: key });
      }
      const masked = sensitive && !reveal;
      return {
        key: v.key,
        value: masked ? MASK : v.value,
        is_secret: v.is_secret,
        masked,
        description: v.description,
        grants: v.grants,
        updated_at: new Date(v.updated_at).toISOString(),
      };
    },
  );

  api.put(
    '/api/v1/variables/:key',
    {
      schema: {
        summary: 'Create or replace a Variable (sensitive-looking keys are stored sealed)',
        params: { type: 'object', properties: { key: { type: 'string', pattern: ID } } },
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
      const { key } = req.params as { key: string };
      const body = req.body as { value: string; secret?: boolean; description?: string };
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
      return {
        key,
        value: secret || isSensitiveKey(key) ? MASK : body.value,
        is_secret: secret,
        masked: secret || isSensitiveKey(key),
        description: body.description ?? '',
        updated_at: new Date(now).toISOString(),
      };
    },
  );

  api.delete(
    '/api/v1/variables/:key',
    {
      schema: {
        summary: 'Delete a Variable; tasks that declared it stop receiving it',
        response: { 204: { type: 'null' }, ...stdErrors },
      },
    },
    async (req, reply) => {
      const { key } = req.params as { key: string };
      if (!(await req.scope.vault.deleteVariable(key)))
        throw notFound('variable', key, 'leoflow variables list');
      await auditRequest(req, 'variable.delete', { type: 'variable', id: key });
      return reply.status(204).send();
    },
  );

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
      const { variables } = req.body as {
        variables: { key: string; value: string; secret?: boolean }[];
      };
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

  // ---- connections ----
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
      const q = req.query as { limit: number; offset: number };
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
        response: { 200: connectionSchema, ...stdErrors },
      },
    },
    async (req) => {
      const { id } = req.params as { id: string };
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
        response: { 200: revealedConnectionSchema, ...stdErrors },
      },
    },
    async (req) => {
      const { id } = req.params as { id: string };
      const c = await req.scope.vault.getConnection(id);
      if (!c) throw notFound('connection', id, 'leoflow connections list');
      await auditRequest(req, 'connection.reveal', { type: 'connection', id });
      return { conn_id: id, uri: formatConnectionUri(c.conn), connection: c.conn };
    },
  );

  api.put(
    '/api/v1/connections/:id',
    {
      schema: {
        summary: 'Create or replace a Connection from a URI, Airflow JSON or fields',
        params: { type: 'object', properties: { id: { type: 'string', pattern: ID } } },
        body: connectionBody,
        response: { 200: connectionSchema, ...stdErrors },
      },
    },
    async (req) => {
      const { id } = req.params as { id: string };
      const body = req.body as ConnectionBody;
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
        response: { 204: { type: 'null' }, ...stdErrors },
      },
    },
    async (req, reply) => {
      const { id } = req.params as { id: string };
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
      const { id } = req.params as { id: string };
      const c = await req.scope.vault.getConnection(id);
      if (!c) throw notFound('connection', id, 'leoflow connections list');
      const result = checkConnectionStructure(c.conn);
      await auditRequest(req, 'connection.test', { type: 'connection', id }, { ok: result.ok });
      return { conn_id: id, ...result };
    },
  );

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
      const { connections } = req.body as {
        connections: { conn_id: string; connection: ConnectionBody['connection'] }[];
      };
      const now = clock.now();
      for (const c of connections) {
        await req.scope.vault.setConnection(
          c.conn_id,
          connectionFromBody({ connection: c.connection! }),
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

const NOT_FOUND = {
  variable: 'LF_VARIABLE_NOT_FOUND',
  connection: 'LF_CONNECTION_NOT_FOUND',
} as const;

function notFound(kind: keyof typeof NOT_FOUND, id: string, hint: string): VaultError {
  return new VaultError(NOT_FOUND[kind], `no ${kind} "${id}"; see \`${hint}\``);
}
