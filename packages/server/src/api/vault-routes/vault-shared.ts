import {
  assertJsonDepth,
  parseConnectionJson,
  parseConnectionUri,
  redactConnectionExtra,
  requireConnType,
  VaultError,
  type Clock,
  type Connection,
  isSensitiveKey,
} from '@leoflow/core';

export interface VaultRouteDeps {
  clock: Clock;
}

export const MASK = '***';
export const nullableString = { type: ['string', 'null'] } as const;

export const variableSchema = {
  type: 'object',
  properties: {
    key: { type: 'string' },
    value: nullableString,
    is_secret: { type: 'boolean' },
    masked: { type: 'boolean' },
    description: { type: 'string' },
    grants: {
      type: ['array', 'null'],
      items: { type: 'string' },
      description: 'DAG id patterns that may declare it; null: every DAG (GET …/grants)',
    },
    updated_at: { type: 'string' },
  },
} as const;

/**
 * A Variable as the API shows it: a secret value (stored sealed, or under a sensitive-looking key)
 * is masked unless the caller asked to reveal it and passed the reveal check.
 */
export function variableOut(
  v: {
    key: string;
    value: string | null;
    is_secret: boolean;
    description: string;
    grants?: readonly string[] | null;
    updated_at: number;
  },
  opts: { reveal: boolean },
) {
  const masked = (v.is_secret || isSensitiveKey(v.key)) && !opts.reveal;
  return {
    key: v.key,
    value: masked ? MASK : v.value,
    is_secret: v.is_secret,
    masked,
    description: v.description,
    grants: v.grants,
    updated_at: new Date(v.updated_at).toISOString(),
  };
}

/**
 * Replies never carry a password: only `has_password`, and an extra in which every value is
 * masked unless its field is on NON_SECRET_EXTRA_FIELDS (default-deny; redactConnectionExtra).
 */
export const connectionSchema = {
  type: 'object',
  properties: {
    conn_id: { type: 'string' },
    conn_type: { type: 'string' },
    host: nullableString,
    login: nullableString,
    schema: nullableString,
    port: { type: ['integer', 'null'] },
    description: { type: 'string' },
    has_password: { type: 'boolean' },
    extra: { type: ['object', 'null'], additionalProperties: true },
    grants: {
      type: ['array', 'null'],
      items: { type: 'string' },
      description: 'DAG id patterns that may declare it; null: every DAG (GET …/grants)',
    },
    updated_at: { type: 'string' },
  },
} as const;

/** Only for the explicit, audited reveal route. */
export const revealedConnectionSchema = {
  type: 'object',
  properties: {
    conn_id: { type: 'string' },
    uri: { type: 'string' },
    connection: {
      type: 'object',
      properties: {
        conn_type: { type: 'string' },
        host: nullableString,
        login: nullableString,
        password: nullableString,
        schema: nullableString,
        port: { type: ['integer', 'null'] },
        extra: { type: ['object', 'null'], additionalProperties: true },
      },
    },
  },
} as const;

export const connectionBody = {
  type: 'object',
  properties: {
    uri: { type: 'string', minLength: 1 },
    json: { type: 'string', minLength: 1 },
    connection: {
      type: 'object',
      required: ['conn_type'],
      properties: {
        conn_type: { type: 'string', minLength: 1 },
        host: nullableString,
        login: nullableString,
        password: nullableString,
        schema: nullableString,
        port: { type: ['integer', 'null'], minimum: 0, maximum: 65535 },
        extra: { type: ['object', 'null'], additionalProperties: true },
      },
      additionalProperties: false,
    },
    description: { type: 'string', maxLength: 2000 },
  },
  additionalProperties: false,
} as const;

export const ID = '^[A-Za-z0-9_][A-Za-z0-9_.-]{0,249}$';

export interface ConnectionBody {
  uri?: string;
  json?: string;
  connection?: Partial<Connection> & { conn_type: string };
  description?: string;
}

export function connectionFromBody(body: ConnectionBody): Connection {
  const given = [body.uri, body.json, body.connection].filter((v) => v !== undefined).length;
  if (given !== 1) {
    throw new VaultError(
      'LF_CONN_BODY_INVALID',
      'give exactly one of uri, json or connection (e.g. --uri postgres://user:pass@host:5432/db)',
    );
  }
  if (body.uri !== undefined) return parseConnectionUri(body.uri);
  if (body.json !== undefined) {
    assertJsonDepth(body.json, 'the connection JSON');
    return requireConnType(parseConnectionJson(body.json));
  }
  const c = body.connection!;
  return {
    conn_type: c.conn_type,
    host: c.host ?? null,
    login: c.login ?? null,
    password: c.password ?? null,
    schema: c.schema ?? null,
    port: c.port ?? null,
    extra: c.extra ?? null,
  };
}

export function publicConnection(
  id: string,
  conn: Connection,
  description: string,
  updatedAt: number,
) {
  return {
    conn_id: id,
    conn_type: conn.conn_type,
    host: conn.host,
    login: conn.login,
    schema: conn.schema,
    port: conn.port,
    description,
    has_password: conn.password !== null && conn.password !== '',
    extra: conn.extra === null ? null : redactConnectionExtra(conn.extra),
    updated_at: new Date(updatedAt).toISOString(),
  };
}

export const NOT_FOUND = {
  variable: 'LF_VARIABLE_NOT_FOUND',
  connection: 'LF_CONNECTION_NOT_FOUND',
} as const;

export function notFound(kind: keyof typeof NOT_FOUND, id: string, hint: string): VaultError {
  return new VaultError(NOT_FOUND[kind], `no ${kind} "${id}"; see \`${hint}\``);
}
