import { LeoflowError, validateDagSpec } from '@leoflow/core';
import type { FastifyInstance } from 'fastify';
import { auditRequest } from './audit.js';
import {
  dagSchema,
  importErrorSchema,
  listReply,
  nextOffset,
  pageQuery,
  paramsOf,
  stdErrors,
} from './schemas.js';
import { dagOut, importErrorOut } from './serialize.js';
import { typedApi } from './typed-routes.js';

export function registerDagRoutes(app: FastifyInstance, deps: { onChange: () => void }): void {
  const api = typedApi(app);
  api.get(
    '/api/v1/dags',
    {
      schema: {
        summary: 'List DAGs',
        querystring: { type: 'object', properties: pageQuery, additionalProperties: false },
        response: { 200: listReply('dags', dagSchema), ...stdErrors },
      },
    },
    async (req) => {
      const q = req.query;
      const dags = await req.scope.listDags(q);
      return { dags: dags.map(dagOut), next_offset: nextOffset(dags.length, q) };
    },
  );

  api.post(
    '/api/v1/dags',
    {
      schema: {
        summary: 'Register a compiled dag.json as a new DAG version (no-op when unchanged)',
        body: { type: 'object', additionalProperties: true },
        response: {
          200: {
            type: 'object',
            properties: {
              dag_id: { type: 'string' },
              version: { type: 'integer' },
              created: { type: 'boolean' },
            },
          },
          ...stdErrors,
        },
      },
    },
    async (req) => {
      const result = validateDagSpec(req.body);
      if (!result.ok) {
        throw new LeoflowError(
          result.errors[0]?.code ?? 'LF_DAG_SCHEMA',
          `dag.json is not valid: ${result.errors.map((e) => `${e.path || '(root)'}: ${e.message}`).join('; ')}; ` +
            'compile it with `leoflow dags compile <dir>` to see positions',
          { errors: result.errors },
        );
      }
      const spec = result.spec;
      const out = await req.scope.registerDag(spec);
      if (out.created) {
        await auditRequest(
          req,
          'dag.version.register',
          { type: 'dag', id: spec.dag_id },
          { version: out.version },
        );
      }
      deps.onChange();
      return { dag_id: spec.dag_id, version: out.version, created: out.created };
    },
  );

  api.get(
    '/api/v1/dags/:dag_id',
    {
      schema: {
        summary: "A DAG and its current version's spec",
        params: paramsOf('dag_id'),
        response: {
          200: {
            type: 'object',
            properties: { dag: dagSchema, spec: { type: 'object', additionalProperties: true } },
          },
          ...stdErrors,
        },
      },
    },
    async (req) => {
      const { dag_id } = req.params;
      const dag = await req.scope.getDag(dag_id);
      const v = await req.scope.getDagVersion(dag_id, dag.current_version);
      return { dag: dagOut(dag), spec: v.spec };
    },
  );

  api.patch(
    '/api/v1/dags/:dag_id',
    {
      schema: {
        summary: 'Pause or unpause a DAG',
        params: paramsOf('dag_id'),
        body: {
          type: 'object',
          required: ['is_paused'],
          properties: { is_paused: { type: 'boolean' } },
          additionalProperties: false,
        },
        response: { 200: dagSchema, ...stdErrors },
      },
    },
    async (req) => {
      const { dag_id } = req.params;
      const { is_paused } = req.body;
      const dag = await req.scope.setDagPaused(dag_id, is_paused);
      await auditRequest(req, is_paused ? 'dag.pause' : 'dag.unpause', {
        type: 'dag',
        id: dag_id,
      });
      deps.onChange();
      return dagOut(dag);
    },
  );

  registerDagVersionRoutes(app);
  registerImportErrorRoutes(app);
}

/** A DAG's versions: the list, and one version's compiled spec. */
function registerDagVersionRoutes(app: FastifyInstance): void {
  const api = typedApi(app);
  api.get(
    '/api/v1/dags/:dag_id/versions',
    {
      schema: {
        summary: 'Every registered version of a DAG',
        params: paramsOf('dag_id'),
        response: {
          200: {
            type: 'object',
            properties: {
              versions: {
                type: 'array',
                items: {
                  type: 'object',
                  properties: {
                    version: { type: 'integer' },
                    spec_hash: { type: 'string' },
                    created_at: { type: 'string' },
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
      const { dag_id } = req.params;
      const versions = await req.scope.listDagVersions(dag_id);
      return {
        versions: versions.map((v) => ({
          version: v.version,
          spec_hash: v.spec_hash,
          created_at: new Date(v.created_at).toISOString(),
        })),
      };
    },
  );

  api.get(
    '/api/v1/dags/:dag_id/versions/:version',
    {
      schema: {
        summary: 'The spec of one DAG version',
        params: {
          type: 'object',
          required: ['dag_id', 'version'],
          properties: { dag_id: { type: 'string' }, version: { type: 'integer', minimum: 1 } },
        },
        response: {
          200: {
            type: 'object',
            properties: {
              version: { type: 'integer' },
              spec: { type: 'object', additionalProperties: true },
            },
          },
          ...stdErrors,
        },
      },
    },
    async (req) => {
      const { dag_id, version } = req.params;
      const v = await req.scope.getDagVersion(dag_id, version);
      return { version: v.version, spec: v.spec };
    },
  );
}

/** The DAG files of the watched folder that do not load, with where and why. */
function registerImportErrorRoutes(app: FastifyInstance): void {
  const api = typedApi(app);
  api.get(
    '/api/v1/import-errors',
    {
      schema: {
        summary:
          'DAG files in the DAGs folder that do not load, with file:line:column, code and hint',
        response: {
          200: {
            type: 'object',
            properties: { import_errors: { type: 'array', items: importErrorSchema } },
          },
          ...stdErrors,
        },
      },
    },
    async (req) => {
      const errors = await req.scope.listDagImportErrors();
      return { import_errors: errors.map(importErrorOut) };
    },
  );
}
