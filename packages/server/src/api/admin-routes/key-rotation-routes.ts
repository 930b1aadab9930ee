import type { FastifyInstance } from 'fastify';

import { auditRequest } from '../audit.js';
import { stdErrors } from '../schemas.js';

import { AdminRouteDeps } from './admin-shared.js';
import { typedApi } from '../typed-routes.js';

/** Rotating the vault's data key and the token signing keys (platform). */
export function registerKeyRotationRoutes(app: FastifyInstance, deps: AdminRouteDeps): void {
  const api = typedApi(app);
  const { platform } = deps;
  api.post(
    '/api/v1/secrets/rotate-key',
    {
      schema: {
        summary: 'New vault key; re-encrypt every stored secret under it, online',
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
      const body = req.body ?? {};
      const out = await platform.rotateVaultKey({
        resume: body.resume ?? false,
        prune: body.prune ?? false,
      });
      await auditRequest(
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

  api.post(
    '/api/v1/auth/signing-keys/rotate',
    {
      schema: {
        summary:
          'New signing key for user API tokens; tokens signed by older keys keep working until revoked',
        response: {
          200: {
            type: 'object',
            properties: {
              kid: { type: 'string' },
              keys: {
                type: 'array',
                items: {
                  type: 'object',
                  properties: { kid: { type: 'string' }, signing: { type: 'boolean' } },
                },
              },
            },
          },
          ...stdErrors,
        },
      },
    },
    async (req) => {
      const out = await platform.rotateUserSigningKey();
      await auditRequest(req, 'signing_key.rotate', { type: 'signing_key', id: out.kid });
      return out;
    },
  );
}
