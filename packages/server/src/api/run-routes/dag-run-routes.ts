import type { FastifyInstance } from 'fastify';
import { auditRequest } from '../audit.js';
import {
  listReply,
  nextOffset,
  pageQuery,
  paramsOf,
  runSchema,
  stdErrors,
  taskInstanceSchema,
} from '../schemas.js';
import { runOut, taskInstanceOut } from '../serialize.js';

import { RUN } from './run-shared.js';
import { typedApi } from '../typed-routes.js';

/** DAG runs: trigger, list (one DAG or all), the grid, one run, clear. */
export function registerDagRunRoutes(app: FastifyInstance): void {
  const api = typedApi(app);
  api.post(
    '/api/v1/dags/:dag_id/runs',
    {
      schema: {
        summary: 'Trigger a manual run',
        params: paramsOf('dag_id'),
        body: {
          type: 'object',
          properties: {
            conf: { type: 'object', additionalProperties: true },
            run_id: { type: 'string', pattern: '^[A-Za-z0-9_.:+-]{1,250}$' },
          },
          additionalProperties: false,
        },
        response: { 200: runSchema, ...stdErrors },
      },
    },
    async (req) => {
      const { dag_id } = req.params;
      const body = req.body ?? {};
      const run = await req.scope.triggerRun(dag_id, {
        ...(body.conf !== undefined ? { conf: body.conf } : {}),
        ...(body.run_id !== undefined ? { runId: body.run_id } : {}),
      });
      await auditRequest(req, 'run.trigger', { type: 'dag_run', id: `${dag_id}/${run.run_id}` });
      return runOut(run);
    },
  );

  api.get(
    '/api/v1/runs',
    {
      schema: {
        summary: 'List runs, newest first, filtered by DAG, run id or state',
        querystring: {
          type: 'object',
          properties: {
            ...pageQuery,
            dag_id: { type: 'string' },
            run_id: { type: 'string' },
            state: { type: 'string', enum: ['queued', 'running', 'success', 'failed'] },
          },
          additionalProperties: false,
        },
        response: { 200: listReply('runs', runSchema), ...stdErrors },
      },
    },
    async (req) => {
      const q = req.query;
      const list = await req.scope.listRuns(
        {
          ...(q.dag_id ? { dag_id: q.dag_id } : {}),
          ...(q.run_id ? { run_id: q.run_id } : {}),
          ...(q.state ? { state: q.state } : {}),
        },
        { limit: q.limit, offset: q.offset },
      );
      return { runs: list.map(runOut), next_offset: nextOffset(list.length, q) };
    },
  );

  registerOneRunRoutes(app);
}

/** A DAG's grid of runs, one run, and clearing a run. */
function registerOneRunRoutes(app: FastifyInstance): void {
  const api = typedApi(app);
  api.get(
    '/api/v1/dags/:dag_id/grid',
    {
      schema: {
        summary:
          "The grid: a DAG's newest runs (newest first), each with its task instances, in one call",
        params: paramsOf('dag_id'),
        querystring: {
          type: 'object',
          properties: { limit: { type: 'integer', minimum: 1, maximum: 100, default: 25 } },
          additionalProperties: false,
        },
        response: {
          200: {
            type: 'object',
            properties: {
              runs: {
                type: 'array',
                items: {
                  type: 'object',
                  properties: {
                    run: runSchema,
                    task_instances: { type: 'array', items: taskInstanceSchema },
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
      const { limit } = req.query;
      const { runs, taskInstances } = await req.scope.grid(dag_id, limit);
      return {
        runs: runs.map((r) => ({
          run: runOut(r),
          task_instances: (taskInstances.get(r.id) ?? []).map(taskInstanceOut),
        })),
      };
    },
  );

  api.get(
    '/api/v1/dags/:dag_id/runs/:run_id',
    {
      schema: {
        summary: 'A run and its task instances (in dependency order)',
        params: RUN,
        response: {
          200: {
            type: 'object',
            properties: {
              run: runSchema,
              task_instances: { type: 'array', items: taskInstanceSchema },
            },
          },
          ...stdErrors,
        },
      },
    },
    async (req) => {
      const { dag_id, run_id } = req.params;
      const { run, taskInstances } = await req.scope.listTaskInstances(dag_id, run_id);
      return { run: runOut(run), task_instances: taskInstances.map(taskInstanceOut) };
    },
  );

  api.post(
    '/api/v1/dags/:dag_id/runs/:run_id/clear',
    {
      schema: {
        summary: 'Clear tasks (default: all failed, with downstream) so they run again',
        params: RUN,
        body: {
          type: 'object',
          properties: {
            task_ids: { type: 'array', items: { type: 'string' }, minItems: 1 },
            downstream: { type: 'boolean', default: true },
          },
          additionalProperties: false,
        },
        response: {
          200: {
            type: 'object',
            properties: { run: runSchema, cleared: { type: 'array', items: { type: 'string' } } },
          },
          ...stdErrors,
        },
      },
    },
    async (req) => {
      const { dag_id, run_id } = req.params;
      const body = req.body ?? {};
      const out = await req.scope.clearRun(dag_id, run_id, {
        taskIds: body.task_ids ?? null,
        downstream: body.downstream ?? true,
      });
      await auditRequest(
        req,
        'run.clear',
        { type: 'dag_run', id: `${dag_id}/${run_id}` },
        { cleared: out.cleared },
      );
      return { run: runOut(out.run), cleared: out.cleared };
    },
  );
}
