import type { FastifyInstance } from 'fastify';

import { historySchema, stdErrors, taskInstanceSchema } from '../schemas.js';
import { historyOut, taskInstanceOut } from '../serialize.js';

import { RUN, TASK, MAP_INDEX_QUERY } from './run-shared.js';
import { typedApi } from '../typed-routes.js';

/** A run's task instances: all of them, one (with its tries), a mapped task's instances. */
export function registerTaskInstanceRoutes(app: FastifyInstance): void {
  const api = typedApi(app);
  api.get(
    '/api/v1/dags/:dag_id/runs/:run_id/tasks',
    {
      schema: {
        summary: "A run's task instances (in dependency order)",
        params: RUN,
        response: {
          200: {
            type: 'object',
            properties: { task_instances: { type: 'array', items: taskInstanceSchema } },
          },
          ...stdErrors,
        },
      },
    },
    async (req) => {
      const { dag_id, run_id } = req.params;
      const { taskInstances } = await req.scope.listTaskInstances(dag_id, run_id);
      return { task_instances: taskInstances.map(taskInstanceOut) };
    },
  );

  api.get(
    '/api/v1/dags/:dag_id/runs/:run_id/tasks/:task_id',
    {
      schema: {
        summary: 'A task instance and its earlier tries (a mapped task: name the map index)',
        params: TASK,
        querystring: MAP_INDEX_QUERY,
        response: {
          200: {
            type: 'object',
            properties: {
              task_instance: taskInstanceSchema,
              history: { type: 'array', items: historySchema },
            },
          },
          ...stdErrors,
        },
      },
    },
    async (req) => {
      const { dag_id, run_id, task_id } = req.params;
      const { map_index } = req.query;
      const { taskInstance, history } = await req.scope.taskHistory(
        dag_id,
        run_id,
        task_id,
        map_index,
      );
      return { task_instance: taskInstanceOut(taskInstance), history: history.map(historyOut) };
    },
  );

  api.get(
    '/api/v1/dags/:dag_id/runs/:run_id/tasks/:task_id/mapped',
    {
      schema: {
        summary:
          "A mapped task's task instances, one per map index (Airflow's listMapped); its one unexpanded instance (map_index -1) before it expands",
        params: TASK,
        response: {
          200: {
            type: 'object',
            properties: {
              task_id: { type: 'string' },
              task_instances: { type: 'array', items: taskInstanceSchema },
            },
          },
          ...stdErrors,
        },
      },
    },
    async (req) => {
      const { dag_id, run_id, task_id } = req.params;
      const { taskInstances } = await req.scope.mappedInstances(dag_id, run_id, task_id);
      return { task_id, task_instances: taskInstances.map(taskInstanceOut) };
    },
  );
}
