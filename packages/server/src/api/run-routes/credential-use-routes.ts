import type { FastifyInstance } from 'fastify';
import { auditRequest } from '../audit.js';
import { stdErrors } from '../schemas.js';

import { TASK } from './run-shared.js';
import { typedApi } from '../typed-routes.js';

/** What a revocation changed, field by field (the CLI prints these sentences as they are). */
const revocationReplySchema = {
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
} as const;

/** The credential plane's operator actions: names read without declaring, and revoking an attempt's credential. */
export function registerCredentialUseRoutes(app: FastifyInstance): void {
  const api = typedApi(app);
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
      const q = req.query;
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
          200: revocationReplySchema,
          ...stdErrors,
        },
      },
    },
    async (req) => {
      const { dag_id, run_id, task_id } = req.params;
      const body = req.body ?? {};
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
