import type { FastifyInstance } from 'fastify';
import { auditRequest } from '../audit.js';
import { paramsOf, runSchema, stdErrors } from '../schemas.js';
import { runOut } from '../serialize.js';
import { typedApi } from '../typed-routes.js';

/**
 * Mark success / mark failed (Airflow's dialog): tasks with their downstream or upstream, or a
 * whole run. A marked task's live attempt is stopped and its credential revoked.
 */
export function registerRunMarkRoutes(app: FastifyInstance): void {
  const api = typedApi(app);
  api.post(
    '/api/v1/dags/:dag_id/runs/:run_id/mark',
    {
      schema: {
        summary:
          "Mark tasks (with their downstream/upstream) or the whole run success or failed; a marked task's live attempt is stopped and its credential revoked",
        params: paramsOf('dag_id', 'run_id'),
        body: {
          type: 'object',
          required: ['state'],
          properties: {
            state: { type: 'string', enum: ['success', 'failed'] },
            task_ids: {
              type: 'array',
              items: { type: 'string' },
              minItems: 1,
              description: 'omit to mark the whole run',
            },
            downstream: { type: 'boolean', default: false },
            upstream: { type: 'boolean', default: false },
          },
          additionalProperties: false,
        },
        response: {
          200: {
            type: 'object',
            properties: {
              run: runSchema,
              marked: {
                type: 'array',
                items: { type: 'string' },
                description: 'the task instances whose state changed (task_id, or task_id[i])',
              },
            },
          },
          ...stdErrors,
        },
      },
    },
    async (req) => {
      const { dag_id, run_id } = req.params;
      const body = req.body;
      const input = {
        taskIds: body.task_ids ?? null,
        state: body.state,
        downstream: body.downstream ?? false,
        upstream: body.upstream ?? false,
      };
      const out = await req.scope.markRun(dag_id, run_id, input);
      await auditRequest(
        req,
        input.taskIds === null ? 'run.mark' : 'task.mark',
        { type: 'dag_run', id: `${dag_id}/${run_id}` },
        {
          state: input.state,
          task_ids: input.taskIds,
          downstream: input.downstream,
          upstream: input.upstream,
          marked: out.marked,
        },
      );
      return { run: runOut(out.run), marked: out.marked };
    },
  );
}
