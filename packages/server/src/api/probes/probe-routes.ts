import type { FastifyInstance } from 'fastify';
import type { Readiness } from './readiness.js';

const readinessSchema = {
  type: 'object',
  properties: {
    ready: { type: 'boolean' },
    checks: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          name: { type: 'string' },
          ok: { type: 'boolean' },
          gating: { type: 'boolean' },
          detail: { type: 'string' },
        },
      },
    },
  },
} as const;

/**
 * Kubernetes' probes. /healthz: the process answers (liveness: restart it when it does not).
 * /readyz: it should be sent traffic (readiness: 503 takes it out of its Service). Outside
 * /api/v1, unauthenticated, and revealing only states.
 */
export function registerProbeRoutes(app: FastifyInstance, readiness: () => Promise<Readiness>) {
  app.get(
    '/healthz',
    {
      schema: {
        summary: 'Liveness probe: 200 while the process serves requests',
        response: { 200: { type: 'object', properties: { status: { type: 'string' } } } },
      },
    },
    () => Promise.resolve({ status: 'ok' }),
  );
  app.get(
    '/readyz',
    {
      schema: {
        summary:
          'Readiness probe: 200 when not draining, the store reachable and current, and a scheduler leader known; 503 with the failing checks otherwise',
        response: { 200: readinessSchema, 503: readinessSchema },
      },
    },
    async (_req, reply) => {
      const r = await readiness();
      return reply.status(r.ready ? 200 : 503).send(r);
    },
  );
}
