import type { FastifyInstance, FastifyRequest } from 'fastify';
import { auditRequest } from './audit.js';
import {
  historySchema,
  listReply,
  logLineSchema,
  nextOffset,
  pageQuery,
  paramsOf,
  runSchema,
  stdErrors,
  taskInstanceSchema,
} from './schemas.js';
import { historyOut, logLineOut, runOut, taskInstanceOut } from './serialize.js';
import type { AttemptRecordRow } from '../store/types.js';

const RUN = paramsOf('dag_id', 'run_id');

/** Validated by the TASK params schema before the handler runs. */
function taskParams(req: FastifyRequest): { dag_id: string; run_id: string; task_id: string } {
  return req.params as { dag_id: string; run_id: string; task_id: string };
}
const TASK = paramsOf('dag_id', 'run_id', 'task_id');

/** `?map_index=N`: which task instance of a mapped task (-1: a task that is not mapped). */
const MAP_INDEX_QUERY = {
  type: 'object',
  properties: { map_index: { type: 'integer', minimum: -1 } },
  additionalProperties: false,
} as const;

export function registerRunRoutes(api: FastifyInstance): void {
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
      const { dag_id } = req.params as { dag_id: string };
      const body = (req.body ?? {}) as { conf?: Record<string, unknown>; run_id?: string };
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
      const q = req.query as {
        limit: number;
        offset: number;
        dag_id?: string;
        run_id?: string;
        state?: 'queued';
      };
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
      const { dag_id } = req.params as { dag_id: string };
      const { limit } = req.query as { limit: number };
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
      const { dag_id, run_id } = req.params as { dag_id: string; run_id: string };
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
      const { dag_id, run_id } = req.params as { dag_id: string; run_id: string };
      const body = (req.body ?? {}) as { task_ids?: string[]; downstream?: boolean };
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

  api.post(
    '/api/v1/dags/:dag_id/runs/:run_id/mark',
    {
      schema: {
        summary:
          "Mark tasks (with their downstream/upstream) or the whole run success or failed; a marked task's live attempt is stopped and its credential revoked",
        params: RUN,
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
      const { dag_id, run_id } = req.params as { dag_id: string; run_id: string };
      const body = (req.body ?? {}) as {
        state: string;
        task_ids?: string[];
        downstream?: boolean;
        upstream?: boolean;
      };
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
      const { dag_id, run_id } = req.params as { dag_id: string; run_id: string };
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
      const { dag_id, run_id, task_id } = taskParams(req);
      const { map_index } = req.query as { map_index?: number };
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
      const { dag_id, run_id, task_id } = taskParams(req);
      const { taskInstances } = await req.scope.mappedInstances(dag_id, run_id, task_id);
      return { task_id, task_instances: taskInstances.map(taskInstanceOut) };
    },
  );

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
      const { dag_id, run_id, task_id } = taskParams(req);
      const q = req.query as {
        try?: number;
        after_line: number;
        limit: number;
        map_index?: number;
      };
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
      const { dag_id, run_id, task_id } = taskParams(req);
      const { map_index } = req.query as { map_index?: number };
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
      const { dag_id, run_id, task_id } = taskParams(req);
      const q = req.query as { try?: number; map_index?: number };
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

  api.get(
    '/api/v1/secrets/undeclared-use',
    {
      schema: {
        summary:
          'Per DAG: Variables and Connections its tasks read through the SDK without declaring them (secret_scoping=permissive) — what enforce would break',
        querystring: {
          type: 'object',
          properties: { dag_id: { type: 'string', pattern: '^[A-Za-z0-9_.-]{1,250}$' } },
          additionalProperties: false,
        },
        response: {
          200: {
            type: 'object',
            properties: {
              dags: {
                type: 'array',
                items: {
                  type: 'object',
                  properties: {
                    dag_id: { type: 'string' },
                    variables: { type: 'array', items: { type: 'string' } },
                    connections: { type: 'array', items: { type: 'string' } },
                    attempts: { type: 'integer' },
                    last_seen: { type: 'string' },
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
      const q = req.query as { dag_id?: string };
      const dags = await req.scope.undeclaredUse(q.dag_id);
      return { dags: dags.map((d) => ({ ...d, last_seen: new Date(d.last_seen).toISOString() })) };
    },
  );

  api.post(
    '/api/v1/dags/:dag_id/runs/:run_id/tasks/:task_id/revoke-credential',
    {
      schema: {
        summary:
          "Revoke an attempt's credential at once, whatever its state (optionally stop a live attempt); the answer says what changed",
        params: TASK,
        body: {
          type: 'object',
          properties: {
            try: { type: 'integer', minimum: 1 },
            map_index: { type: 'integer', minimum: -1 },
            terminate: { type: 'boolean', default: false },
          },
          additionalProperties: false,
        },
        response: {
          200: {
            type: 'object',
            required: [
              'try_number',
              'attempt_state',
              'live',
              'current',
              'revoked_now',
              'revoked_at',
              'credential_expires_at',
              'tokens_still_valid',
              'changes',
              'terminated',
            ],
            properties: {
              try_number: { type: 'integer' },
              attempt_state: { type: 'string' },
              live: { type: 'boolean', description: 'the try was queued or running' },
              current: {
                type: 'boolean',
                description: "the try was the task instance's current one (not superseded)",
              },
              revoked_now: {
                type: 'boolean',
                description: 'false when it had already been revoked (nothing changed)',
              },
              revoked_at: { type: 'string', format: 'date-time' },
              credential_expires_at: {
                type: ['string', 'null'],
                format: 'date-time',
                description: "the attempt's newest token's exp",
              },
              tokens_still_valid: {
                type: 'boolean',
                description: 'a token of the attempt still verified (before its exp) when revoked',
              },
              changes: {
                type: 'array',
                items: { type: 'string' },
                description: 'what the revocation changed, one sentence each',
              },
              terminated: { type: 'boolean' },
            },
          },
          ...stdErrors,
        },
      },
    },
    async (req) => {
      const { dag_id, run_id, task_id } = taskParams(req);
      const body = (req.body ?? {}) as { try?: number; map_index?: number; terminate?: boolean };
      const out = await req.scope.revokeCredential({
        dagId: dag_id,
        runId: run_id,
        taskId: task_id,
        ...(body.try !== undefined ? { tryNumber: body.try } : {}),
        ...(body.map_index !== undefined ? { mapIndex: body.map_index } : {}),
        terminate: body.terminate ?? false,
      });
      await auditRequest(
        req,
        'credential.revoke',
        { type: 'task_instance', id: `${dag_id}/${run_id}/${task_id}` },
        {
          try_number: out.try_number,
          terminate: out.terminated,
          live: out.live,
          revoked_now: out.revoked_now,
          tokens_still_valid: out.tokens_still_valid,
        },
      );
      const { task_instance_id: _internal, ...reply } = out;
      return reply;
    },
  );
}

const nullableStr = { type: ['string', 'null'] } as const;
const names = { type: ['array', 'null'], items: { type: 'string' } } as const;

/** One attempt's delivery record as the API shows it (the session hash is never shown). */
export const deliveryRecordSchema = {
  type: 'object',
  properties: {
    try_number: { type: 'integer' },
    scoping_mode: nullableStr,
    liveness_mode: nullableStr,
    registered_at: nullableStr,
    variables_delivered: names,
    connections_delivered: names,
    variables_refusal: nullableStr,
    connections_refusal: nullableStr,
    renewals: { type: 'integer' },
    last_renewed_at: nullableStr,
    renewal_stopped: nullableStr,
    credential_expires_at: nullableStr,
    undeclared_reads: {
      type: ['object', 'null'],
      properties: {
        variables: { type: 'array', items: { type: 'string' } },
        connections: { type: 'array', items: { type: 'string' } },
      },
    },
  },
} as const;

function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

export function deliveryRecordOut(r: AttemptRecordRow) {
  return {
    try_number: r.try_number,
    scoping_mode: r.scoping_mode,
    liveness_mode: r.liveness_mode,
    registered_at: iso(r.registered_at),
    variables_delivered: r.variables_delivered,
    connections_delivered: r.connections_delivered,
    variables_refusal: r.variables_refusal,
    connections_refusal: r.connections_refusal,
    renewals: r.renewals,
    last_renewed_at: iso(r.last_renewed_at),
    renewal_stopped: r.renewal_stopped,
    credential_expires_at: iso(r.credential_exp),
    undeclared_reads: r.undeclared_reads,
  };
}

function decodeUtf8(b: Uint8Array): string | null {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(b);
  } catch {
    return null;
  }
}
