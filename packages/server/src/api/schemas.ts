/**
 * Reply schemas are a security feature: fast-json-stringify emits only the declared fields, so
 * a stray property added to a row can never leak through a response.
 */
const nullableString = { type: ['string', 'null'] } as const;
const nullableInt = { type: ['integer', 'null'] } as const;

export const errorSchema = {
  type: 'object',
  required: ['code', 'message'],
  properties: {
    code: { type: 'string' },
    message: { type: 'string' },
    details: { type: 'object', additionalProperties: true },
  },
} as const;

export const dagSchema = {
  type: 'object',
  properties: {
    dag_id: { type: 'string' },
    current_version: { type: 'integer' },
    is_paused: { type: 'boolean' },
    is_active: { type: 'boolean' },
    source_file: nullableString,
    created_at: nullableString,
    updated_at: nullableString,
  },
} as const;

export const importErrorSchema = {
  type: 'object',
  properties: {
    file: { type: 'string' },
    dag_id: nullableString,
    diagnostics: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          code: { type: 'string' },
          message: { type: 'string' },
          file: { type: 'string' },
          line: { type: 'integer' },
          column: { type: 'integer' },
          path: { type: 'string' },
          hint: { type: 'string' },
        },
      },
    },
    first_seen_at: nullableString,
    updated_at: nullableString,
  },
} as const;

export const runSchema = {
  type: 'object',
  properties: {
    dag_id: { type: 'string' },
    run_id: { type: 'string' },
    dag_version: { type: 'integer' },
    run_type: { type: 'string' },
    state: { type: 'string' },
    logical_date: nullableString,
    data_interval_start: nullableString,
    data_interval_end: nullableString,
    conf: { type: 'object', additionalProperties: true },
    created_at: nullableString,
    started_at: nullableString,
    ended_at: nullableString,
  },
} as const;

export const taskInstanceSchema = {
  type: 'object',
  properties: {
    task_id: { type: 'string' },
    /** -1 for a task that is not mapped (or not expanded yet) */
    map_index: { type: 'integer' },
    /** a map index's arguments (env name → value) */
    map_value: { type: ['object', 'null'], additionalProperties: { type: 'string' } },
    /** a finished branch / short-circuit task's decision */
    decision: {
      type: ['object', 'null'],
      properties: {
        followed: { type: 'array', items: { type: 'string' } },
        skipped: { type: 'array', items: { type: 'string' } },
      },
    },
    try_number: { type: 'integer' },
    max_tries: { type: 'integer' },
    state: { type: 'string' },
    queued_at: nullableString,
    started_at: nullableString,
    ended_at: nullableString,
    last_heartbeat_at: nullableString,
    retry_at: nullableString,
    exit_code: nullableInt,
    error_message: nullableString,
    hostname: nullableString,
    executor: nullableString,
  },
} as const;

export const historySchema = {
  type: 'object',
  properties: {
    task_id: { type: 'string' },
    map_index: { type: 'integer' },
    try_number: { type: 'integer' },
    state: { type: 'string' },
    started_at: nullableString,
    ended_at: nullableString,
    exit_code: nullableInt,
    error_message: nullableString,
  },
} as const;

export const logLineSchema = {
  type: 'object',
  properties: {
    line_number: { type: 'integer' },
    time: nullableString,
    stream: { type: 'string' },
    message: { type: 'string' },
  },
} as const;

export const pageQuery = {
  limit: { type: 'integer', minimum: 1, maximum: 1000, default: 100 },
  offset: { type: 'integer', minimum: 0, default: 0 },
} as const;

export const stdErrors = {
  400: errorSchema,
  401: errorSchema,
  403: errorSchema,
  404: errorSchema,
  409: errorSchema,
} as const;

/** Lists answer with the offset of the next page, or null on the last one. */
export const nextOffsetSchema = { type: ['integer', 'null'] } as const;

export function nextOffset(
  returned: number,
  page: { limit: number; offset: number },
): number | null {
  return returned < page.limit ? null : page.offset + page.limit;
}

/** A list reply: `{ <key>: [items], next_offset }`. */
export function listReply(key: string, items: object) {
  return {
    type: 'object',
    required: [key, 'next_offset'],
    properties: { [key]: { type: 'array', items }, next_offset: nextOffsetSchema },
  } as const;
}

/** Path parameters: each a non-empty string, all required; typed as such by `typedApi`. */
export function paramsOf<const Name extends string>(...names: Name[]) {
  return {
    type: 'object',
    required: names,
    properties: Object.fromEntries(names.map((n) => [n, { type: 'string', minLength: 1 }])) as {
      [K in Name]: { type: 'string'; minLength: 1 };
    },
  } as const;
}
