import type { FastifyInstance } from 'fastify';

import { listReply, nextOffset, pageQuery, stdErrors } from '../schemas.js';

import { nullableString } from './admin-shared.js';
import { typedApi } from '../typed-routes.js';

/** The tenant's audit log. */
export function registerAuditRoutes(app: FastifyInstance): void {
  const api = typedApi(app);
  api.get(
    '/api/v1/audit',
    {
      schema: {
        summary: "The tenant's audit log, newest first",
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
          200: listReply('events', {
            type: 'object',
            properties: {
              at: { type: 'string' },
              actor: { type: 'string' },
              action: { type: 'string' },
              resource_type: { type: 'string' },
              resource_id: { type: 'string' },
              request_id: nullableString,
              payload: { type: 'object', additionalProperties: true },
            },
          }),
          ...stdErrors,
        },
      },
    },
    async (req) => {
      const q = req.query;
      const events = await req.scope.listAudit(
        {
          ...(q.since ? { since: Date.parse(q.since) } : {}),
          ...(q.action ? { action: q.action } : {}),
        },
        { limit: q.limit, offset: q.offset },
      );
      return {
        events: events.map((e) => ({ ...e, at: new Date(e.at).toISOString() })),
        next_offset: nextOffset(events.length, q),
      };
    },
  );
}
