import type { FastifyInstance } from 'fastify';

import { logLineSchema, stdErrors } from '../schemas.js';
import { logLineOut } from '../serialize.js';

import {
  TASK,
  MAP_INDEX_QUERY,
  deliveryRecordSchema,
  deliveryRecordOut,
  decodeUtf8,
} from './run-shared.js';
import { typedApi } from '../typed-routes.js';

/** What an attempt left: its log, its XCom, and the record of what was delivered to it. */
export function registerAttemptOutputRoutes(app: FastifyInstance): void {
  const api = typedApi(app);
  api.get(
    '/api/v1/dags/:dag_id/runs/:run_id/tasks/:task_id/logs',
    {
      schema: {
        summary: "A try's log lines after a line number (poll with next_after_line to follow)",
        params: TASK,
        querystring: {
          type: 'object',
          properties: {
            try: { type: 'integer', minimum: 1 },
            after_line: { type: 'integer', minimum: 0, default: 0 },
            limit: { type: 'integer', minimum: 1, maximum: 10000, default: 1000 },
            ...MAP_INDEX_QUERY.properties,
          },
          additionalProperties: false,
        },
        response: {
          200: {
            type: 'object',
            properties: {
              try_number: { type: 'integer' },
              lines: { type: 'array', items: logLineSchema },
              next_after_line: { type: 'integer' },
              attempt_finished: { type: 'boolean' },
            },
          },
          ...stdErrors,
        },
      },
    },
    async (req) => {
      const { dag_id, run_id, task_id } = req.params;
      const q = req.query;
      const {
        taskInstance: ti,
        tryNumber,
        lines,
      } = await req.scope.readLogs(dag_id, run_id, task_id, q);
      const finished =
        tryNumber < ti.try_number || !['none', 'scheduled', 'queued', 'running'].includes(ti.state);
      return {
        try_number: tryNumber,
        lines: lines.map(logLineOut),
        next_after_line:
          lines.length > 0 ? (lines[lines.length - 1]?.line_number ?? q.after_line) : q.after_line,
        attempt_finished: finished,
      };
    },
  );

  api.get(
    '/api/v1/dags/:dag_id/runs/:run_id/tasks/:task_id/xcom',
    {
      schema: {
        summary:
          "A task's XCom values (UTF-8 text, or base64 for binary; a mapped task: name the map index)",
        params: TASK,
        querystring: MAP_INDEX_QUERY,
        response: {
          200: {
            type: 'object',
            properties: {
              xcom: {
                type: 'array',
                items: {
                  type: 'object',
                  properties: {
                    key: { type: 'string' },
                    content_type: { type: 'string' },
                    size_bytes: { type: 'integer' },
                    value: { type: 'string' },
                    encoding: { type: 'string', enum: ['utf-8', 'base64'] },
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
      const { dag_id, run_id, task_id } = req.params;
      const { map_index } = req.query;
      const rows = await req.scope.listXComs(dag_id, run_id, task_id, map_index);
      return {
        xcom: rows.map((x) => {
          const text = decodeUtf8(x.value);
          return {
            key: x.key,
            content_type: x.content_type,
            size_bytes: x.value.byteLength,
            value: text ?? Buffer.from(x.value).toString('base64'),
            encoding: text === null ? 'base64' : 'utf-8',
            created_at: new Date(x.created_at).toISOString(),
          };
        }),
      };
    },
  );

  registerDeliveryRecordRoutes(app);
}

/** What the credential plane delivered to each try of a task instance. */
function registerDeliveryRecordRoutes(app: FastifyInstance): void {
  const api = typedApi(app);
  api.get(
    '/api/v1/dags/:dag_id/runs/:run_id/tasks/:task_id/delivery',
    {
      schema: {
        summary:
          'Per attempt: the scoping and liveness modes in force, the secret names delivered (never values), refusals, renewals and the credential expiry',
        params: TASK,
        querystring: {
          type: 'object',
          properties: { try: { type: 'integer', minimum: 1 }, ...MAP_INDEX_QUERY.properties },
          additionalProperties: false,
        },
        response: {
          200: {
            type: 'object',
            properties: {
              task_id: { type: 'string' },
              current_try: { type: 'integer' },
              attempts: { type: 'array', items: deliveryRecordSchema },
            },
          },
          ...stdErrors,
        },
      },
    },
    async (req) => {
      const { dag_id, run_id, task_id } = req.params;
      const q = req.query;
      const { taskInstance, records } = await req.scope.attemptRecords(
        dag_id,
        run_id,
        task_id,
        q.try,
        q.map_index,
      );
      return {
        task_id,
        current_try: taskInstance.try_number,
        attempts: records.map(deliveryRecordOut),
      };
    },
  );
}
