import type { FastifyInstance } from 'fastify';

import { stdErrors } from '../schemas.js';

import { AdminRouteDeps } from './admin-shared.js';
import { typedApi } from '../typed-routes.js';

/** The doctor's report (platform). */
export function registerDoctorRoutes(app: FastifyInstance, deps: AdminRouteDeps): void {
  const api = typedApi(app);
  const { platform } = deps;
  const checkSchema = {
    type: 'object',
    required: ['id', 'status', 'message'],
    properties: {
      id: { type: 'string' },
      status: { type: 'string', enum: ['ok', 'warn', 'fail'] },
      message: { type: 'string' },
    },
  } as const;

  api.get(
    '/api/v1/doctor',
    {
      schema: {
        summary:
          "The running control plane's doctor report: effective configuration (redacted), posture with residual exposures, health checks",
        response: {
          200: {
            type: 'object',
            required: ['edition', 'config', 'posture', 'checks', 'summary'],
            properties: {
              edition: { type: 'string' },
              // Built redacted by the doctor (no key material, no token, database password ***).
              config: { type: 'object', additionalProperties: true },
              posture: { type: 'object', additionalProperties: true },
              checks: { type: 'array', items: checkSchema },
              summary: {
                type: 'object',
                properties: {
                  ok: { type: 'integer' },
                  warn: { type: 'integer' },
                  fail: { type: 'integer' },
                },
              },
            },
          },
          ...stdErrors,
        },
      },
    },
    () => platform.doctorReport(),
  );
}
