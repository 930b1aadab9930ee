import type { FastifyInstance, FastifyTypeProvider } from 'fastify';
import type { FromSchema, JSONSchema } from 'json-schema-to-ts';

/**
 * A route's params, query and body types are derived from the JSON schema that validates them
 * (json-schema-to-ts' `FromSchema`), so a handler cannot disagree with its own validation and
 * needs no cast. We chose json-schema-to-ts over TypeBox because every route already states
 * plain JSON schemas that openapi.ts publishes as they are; TypeBox would rewrite them all in its
 * builder syntax for the same types.
 *
 * Replies are left untyped on purpose: their schemas are a runtime filter (fast-json-stringify
 * emits only declared fields, see schemas.ts), and the serializer helpers in serialize.ts already
 * type each row's shape.
 */
export interface RequestSchemaTypes extends FastifyTypeProvider {
  readonly validator: this['schema'] extends JSONSchema ? FromSchema<this['schema']> : unknown;
  readonly serializer: unknown;
}

/** The API instance route modules register on: requests typed from their schemas. */
export function typedApi(api: FastifyInstance) {
  return api.withTypeProvider<RequestSchemaTypes>();
}

export type TypedApi = ReturnType<typeof typedApi>;
