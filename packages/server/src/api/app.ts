import Fastify, { LogController, type FastifyReply, type FastifyRequest } from 'fastify';
import {
  dagSpecHash,
  isLeoflowError,
  LeoflowError,
  validateDagSpec,
  type Clock,
} from '@leoflow/core';
import type { Logger } from 'pino';
import type { UserPrincipal, UserTokenIssuer } from '../auth/user-token.js';
import { checkDeclarations } from '../dags/registration.js';
import type { RunOperations } from '../scheduler/run-operations.js';
import type { VaultService } from '../vault/vault-service.js';
import { registerVaultRoutes } from './vault-routes.js';
import { auditRequest } from './audit.js';
import { requireAdmin } from './authz.js';
import type { Store } from '../store/store.js';
import { dagOut, historyOut, logLineOut, runOut, taskInstanceOut } from './serialize.js';
import {
  dagSchema,
  historySchema,
  logLineSchema,
  pageQuery,
  runSchema,
  stdErrors,
  taskInstanceSchema,
} from './schemas.js';

export interface ApiDeps {
  rotateKey: (opts: { resume: boolean; prune: boolean }) => Promise<Record<string, unknown>>;
  revoke: (input: {
    tenantId: string;
    dagId: string;
    runId: string;
    taskId: string;
    tryNumber?: number;
    terminate: boolean;
  }) => Promise<{ task_instance_id: string; try_number: number; terminated: boolean }>;
  store: Store;
  clock: Clock;
  users: UserTokenIssuer;
  runs: RunOperations;
  vault: VaultService;
  logger: Logger;
  version: string;
  onChange: () => void;
}

declare module 'fastify' {
  interface FastifyRequest {
    principal: UserPrincipal;
  }
}

const STATUS_BY_CODE: Record<string, number> = {
  LF_DAG_NOT_FOUND: 404,
  LF_RUN_NOT_FOUND: 404,
  LF_TASK_NOT_FOUND: 404,
  LF_DAG_VERSION_NOT_FOUND: 404,
  LF_XCOM_NOT_FOUND: 404,
  LF_VARIABLE_NOT_FOUND: 404,
  LF_CONNECTION_NOT_FOUND: 404,
  LF_FORBIDDEN: 403,
  LF_ATTEMPT_NOT_LIVE: 409,
  LF_SECRET_ROTATION_UNSUPPORTED: 409,
  LF_RUN_EXISTS: 409,
  LF_TASK_ACTIVE: 409,
  LF_UNAUTHENTICATED: 401,
};

export function buildApi(deps: ApiDeps) {
  const { store, clock, users, runs } = deps;
  const app = Fastify({
    loggerInstance: deps.logger.child({ component: 'api' }),
    // Per-request access logs would drown the scheduler's lines in a one-process Lite.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: 8 * 1024 * 1024,
    ajv: { customOptions: { removeAdditional: false, coerceTypes: 'array', allErrors: true } },
  });

  app.decorateRequest('principal', null as unknown as UserPrincipal);

  app.setErrorHandler((err, req, reply) => {
    if (isLeoflowError(err)) {
      return reply
        .status(STATUS_BY_CODE[err.code] ?? 400)
        .send({ code: err.code, message: err.message, details: err.details });
    }
    const e = err as { validation?: unknown; statusCode?: number; message: string };
    if (e.validation) {
      return reply.status(400).send({
        code: 'LF_BAD_REQUEST',
        message: `invalid request: ${e.message}`,
        details: { validation: e.validation },
      });
    }
    if (e.statusCode && e.statusCode < 500) {
      return reply
        .status(e.statusCode)
        .send({ code: 'LF_BAD_REQUEST', message: e.message, details: {} });
    }
    req.log.error({ err }, 'request failed');
    return reply
      .status(500)
      .send({ code: 'LF_INTERNAL', message: 'internal error; see the server log', details: {} });
  });

  app.setNotFoundHandler((req, reply) => {
    void reply.status(404).send({
      code: 'LF_ROUTE_NOT_FOUND',
      message: `no route ${req.method} ${req.url.split('?')[0] ?? ''}`,
      details: {},
    });
  });

  app.get(
    '/api/v1/health',
    {
      schema: {
        response: {
          200: {
            type: 'object',
            properties: { status: { type: 'string' }, version: { type: 'string' } },
          },
        },
      },
    },
    () => Promise.resolve({ status: 'ok', version: deps.version }),
  );

  // Everything else needs a user token.
  void app.register((api, _opts, done) => {
    api.addHook('onRequest', async (req: FastifyRequest, reply: FastifyReply) => {
      const header = req.headers.authorization;
      const m = header ? /^Bearer\s+(\S+)$/i.exec(header) : null;
      const principal = m?.[1] ? await users.verify(m[1], clock.now()) : null;
      if (!principal) {
        return reply.status(401).send({
          code: 'LF_UNAUTHENTICATED',
          message:
            'missing or invalid API token; pass --token or set LEOFLOW_TOKEN (standalone writes one to <data-dir>/admin.token)',
          details: {},
        });
      }
      req.principal = principal;
    });

    api.get(
      '/api/v1/dags',
      {
        schema: {
          querystring: { type: 'object', properties: pageQuery, additionalProperties: false },
          response: {
            200: { type: 'object', properties: { dags: { type: 'array', items: dagSchema } } },
            ...stdErrors,
          },
        },
      },
      async (req) => {
        const q = req.query as { limit: number; offset: number };
        const dags = await store.listDags(req.principal.tenant_id, q);
        return { dags: dags.map(dagOut) };
      },
    );

    api.post(
      '/api/v1/dags',
      {
        schema: {
          body: { type: 'object' },
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
        await checkDeclarations(store, req.principal.tenant_id, spec);
        const out = await store.putDagVersion(
          req.principal.tenant_id,
          spec,
          dagSpecHash(spec),
          clock.now(),
        );
        if (out.created) {
          await auditRequest(
            store,
            clock,
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
        const { dag_id } = req.params as { dag_id: string };
        const dag = await requireDag(req.principal.tenant_id, dag_id);
        const v = await store.getDagVersion(req.principal.tenant_id, dag_id, dag.current_version);
        return { dag: dagOut(dag), spec: v?.spec ?? {} };
      },
    );

    api.patch(
      '/api/v1/dags/:dag_id',
      {
        schema: {
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
        const { dag_id } = req.params as { dag_id: string };
        const { is_paused } = req.body as { is_paused: boolean };
        await requireDag(req.principal.tenant_id, dag_id);
        await store.setDagPaused(req.principal.tenant_id, dag_id, is_paused, clock.now());
        await auditRequest(store, clock, req, is_paused ? 'dag.pause' : 'dag.unpause', {
          type: 'dag',
          id: dag_id,
        });
        deps.onChange();
        return dagOut(await requireDag(req.principal.tenant_id, dag_id));
      },
    );

    api.get(
      '/api/v1/dags/:dag_id/versions',
      {
        schema: {
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
        const { dag_id } = req.params as { dag_id: string };
        await requireDag(req.principal.tenant_id, dag_id);
        const versions = await store.listDagVersions(req.principal.tenant_id, dag_id);
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
          params: {
            type: 'object',
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
        const { dag_id, version } = req.params as { dag_id: string; version: number };
        const v = await store.getDagVersion(req.principal.tenant_id, dag_id, version);
        if (!v)
          throw new LeoflowError(
            'LF_DAG_VERSION_NOT_FOUND',
            `DAG ${dag_id} has no version ${version}`,
          );
        return { version: v.version, spec: v.spec };
      },
    );

    api.post(
      '/api/v1/dags/:dag_id/runs',
      {
        schema: {
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
        const run = await runs.trigger(req.principal.tenant_id, dag_id, {
          ...(body.conf !== undefined ? { conf: body.conf } : {}),
          ...(body.run_id !== undefined ? { runId: body.run_id } : {}),
        });
        await auditRequest(store, clock, req, 'run.trigger', {
          type: 'dag_run',
          id: `${dag_id}/${run.run_id}`,
        });
        return runOut(run);
      },
    );

    api.get(
      '/api/v1/runs',
      {
        schema: {
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
          response: {
            200: { type: 'object', properties: { runs: { type: 'array', items: runSchema } } },
            ...stdErrors,
          },
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
        const list = await store.listRuns(
          req.principal.tenant_id,
          {
            ...(q.dag_id ? { dag_id: q.dag_id } : {}),
            ...(q.run_id ? { run_id: q.run_id } : {}),
            ...(q.state ? { state: q.state } : {}),
          },
          { limit: q.limit, offset: q.offset },
        );
        return { runs: list.map(runOut) };
      },
    );

    api.get(
      '/api/v1/dags/:dag_id/runs/:run_id',
      {
        schema: {
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
        const run = await requireRun(req.principal.tenant_id, dag_id, run_id);
        const tis = await store.listTaskInstances(run.id);
        // Task instances in the DAG's declaration order (dependency order), not alphabetical.
        const version = await store.getDagVersion(run.tenant_id, run.dag_id, run.dag_version);
        const order = new Map((version?.spec.tasks ?? []).map((t, i) => [t.task_id, i]));
        tis.sort((a, b) => (order.get(a.task_id) ?? Infinity) - (order.get(b.task_id) ?? Infinity));
        return { run: runOut(run), task_instances: tis.map(taskInstanceOut) };
      },
    );

    api.post(
      '/api/v1/dags/:dag_id/runs/:run_id/clear',
      {
        schema: {
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
        const out = await runs.clear(req.principal.tenant_id, dag_id, run_id, {
          taskIds: body.task_ids ?? null,
          downstream: body.downstream ?? true,
        });
        await auditRequest(
          store,
          clock,
          req,
          'run.clear',
          { type: 'dag_run', id: `${dag_id}/${run_id}` },
          { cleared: out.cleared },
        );
        return { run: runOut(out.run), cleared: out.cleared };
      },
    );

    api.get(
      '/api/v1/dags/:dag_id/runs/:run_id/tasks/:task_id',
      {
        schema: {
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
        const { dag_id, run_id, task_id } = req.params as {
          dag_id: string;
          run_id: string;
          task_id: string;
        };
        const run = await requireRun(req.principal.tenant_id, dag_id, run_id);
        const ti = await store.getTaskInstance(run.id, task_id);
        if (!ti)
          throw new LeoflowError('LF_TASK_NOT_FOUND', `run ${run_id} has no task "${task_id}"`);
        const history = await store.listTaskInstanceHistory(run.id, task_id);
        return { task_instance: taskInstanceOut(ti), history: history.map(historyOut) };
      },
    );

    api.get(
      '/api/v1/dags/:dag_id/runs/:run_id/tasks/:task_id/logs',
      {
        schema: {
          querystring: {
            type: 'object',
            properties: {
              try: { type: 'integer', minimum: 1 },
              after_line: { type: 'integer', minimum: 0, default: 0 },
              limit: { type: 'integer', minimum: 1, maximum: 10000, default: 1000 },
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
        const { dag_id, run_id, task_id } = req.params as {
          dag_id: string;
          run_id: string;
          task_id: string;
        };
        const q = req.query as { try?: number; after_line: number; limit: number };
        const run = await requireRun(req.principal.tenant_id, dag_id, run_id);
        const ti = await store.getTaskInstance(run.id, task_id);
        if (!ti)
          throw new LeoflowError('LF_TASK_NOT_FOUND', `run ${run_id} has no task "${task_id}"`);
        const tryNumber = q.try ?? ti.try_number;
        const lines = await store.readLogs(run.id, task_id, tryNumber, q.after_line, q.limit);
        const finished =
          tryNumber < ti.try_number ||
          !['none', 'scheduled', 'queued', 'running'].includes(ti.state);
        return {
          try_number: tryNumber,
          lines: lines.map(logLineOut),
          next_after_line:
            lines.length > 0
              ? (lines[lines.length - 1]?.line_number ?? q.after_line)
              : q.after_line,
          attempt_finished: finished,
        };
      },
    );

    api.get(
      '/api/v1/dags/:dag_id/runs/:run_id/tasks/:task_id/xcom',
      {
        schema: {
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
                      encoding: { type: 'string' },
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
        const { dag_id, run_id, task_id } = req.params as {
          dag_id: string;
          run_id: string;
          task_id: string;
        };
        const run = await requireRun(req.principal.tenant_id, dag_id, run_id);
        const rows = await store.listXComs(run.id, task_id);
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

    api.post(
      '/api/v1/dags/:dag_id/runs/:run_id/tasks/:task_id/revoke-credential',
      {
        schema: {
          body: {
            type: 'object',
            properties: {
              try: { type: 'integer', minimum: 1 },
              terminate: { type: 'boolean', default: false },
            },
            additionalProperties: false,
          },
          response: {
            200: {
              type: 'object',
              properties: { try_number: { type: 'integer' }, terminated: { type: 'boolean' } },
            },
            ...stdErrors,
          },
        },
      },
      async (req) => {
        const { dag_id, run_id, task_id } = req.params as {
          dag_id: string;
          run_id: string;
          task_id: string;
        };
        const body = (req.body ?? {}) as { try?: number; terminate?: boolean };
        requireAdmin(req.principal, 'revoking a credential');
        const out = await deps.revoke({
          tenantId: req.principal.tenant_id,
          dagId: dag_id,
          runId: run_id,
          taskId: task_id,
          ...(body.try !== undefined ? { tryNumber: body.try } : {}),
          terminate: body.terminate ?? false,
        });
        await auditRequest(
          store,
          clock,
          req,
          'credential.revoke',
          { type: 'task_instance', id: `${dag_id}/${run_id}/${task_id}` },
          {
            try_number: out.try_number,
            terminate: out.terminated,
          },
        );
        return out;
      },
    );

    api.post(
      '/api/v1/secrets/rotate-key',
      {
        schema: {
          body: {
            type: 'object',
            properties: {
              resume: { type: 'boolean', default: false },
              prune: { type: 'boolean', default: false },
            },
            additionalProperties: false,
          },
          response: {
            200: {
              type: 'object',
              properties: {
                current_key_id: { type: 'string' },
                new_key: { type: 'boolean' },
                resealed: { type: 'integer' },
                remaining_under_old_keys: { type: 'integer' },
                pruned: { type: 'array', items: { type: 'string' } },
              },
            },
            ...stdErrors,
          },
        },
      },
      async (req) => {
        requireAdmin(req.principal, 'rotating the vault key');
        const body = (req.body ?? {}) as { resume?: boolean; prune?: boolean };
        const out = await deps.rotateKey({
          resume: body.resume ?? false,
          prune: body.prune ?? false,
        });
        await auditRequest(
          store,
          clock,
          req,
          'secret.key_rotate',
          { type: 'keyring', id: String(out.current_key_id) },
          {
            resealed: out.resealed,
            remaining: out.remaining_under_old_keys,
            pruned: Array.isArray(out.pruned) ? out.pruned.length : 0,
          },
        );
        return out;
      },
    );

    api.get(
      '/api/v1/audit',
      {
        schema: {
          querystring: {
            type: 'object',
            properties: {
              ...pageQuery,
              since: { type: 'string', format: 'date-time' },
              action: { type: 'string' },
            },
            additionalProperties: false,
          },
          response: {
            200: {
              type: 'object',
              properties: {
                events: {
                  type: 'array',
                  items: {
                    type: 'object',
                    properties: {
                      at: { type: 'string' },
                      actor: { type: 'string' },
                      action: { type: 'string' },
                      resource_type: { type: 'string' },
                      resource_id: { type: 'string' },
                      request_id: { type: ['string', 'null'] },
                      payload: { type: 'object', additionalProperties: true },
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
        const q = req.query as { limit: number; offset: number; since?: string; action?: string };
        const events = await store.listAudit(
          req.principal.tenant_id,
          {
            ...(q.since ? { since: Date.parse(q.since) } : {}),
            ...(q.action ? { action: q.action } : {}),
          },
          { limit: q.limit, offset: q.offset },
        );
        return { events: events.map((e) => ({ ...e, at: new Date(e.at).toISOString() })) };
      },
    );

    registerVaultRoutes(api, { store, clock, vault: deps.vault });
    done();
  });

  async function requireDag(tenantId: string, dagId: string) {
    const dag = await store.getDag(tenantId, dagId);
    if (!dag) {
      throw new LeoflowError('LF_DAG_NOT_FOUND', `no DAG "${dagId}"; see \`leoflow dags list\``);
    }
    return dag;
  }

  async function requireRun(tenantId: string, dagId: string, runId: string) {
    const run = await store.getRun(tenantId, dagId, runId);
    if (!run) {
      throw new LeoflowError(
        'LF_RUN_NOT_FOUND',
        `DAG ${dagId} has no run "${runId}"; see \`leoflow runs list --dag ${dagId}\``,
      );
    }
    return run;
  }

  return app;
}

function decodeUtf8(b: Uint8Array): string | null {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(b);
  } catch {
    return null;
  }
}
