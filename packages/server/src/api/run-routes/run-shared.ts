import { paramsOf } from '../schemas.js';

import type { AttemptRecordRow } from '../../store/types.js';
export const RUN = paramsOf('dag_id', 'run_id');

export const TASK = paramsOf('dag_id', 'run_id', 'task_id');

/** `?map_index=N`: which task instance of a mapped task (-1: a task that is not mapped). */
export const MAP_INDEX_QUERY = {
  type: 'object',
  properties: { map_index: { type: 'integer', minimum: -1 } },
  additionalProperties: false,
} as const;

export const nullableStr = { type: ['string', 'null'] } as const;
export const names = { type: ['array', 'null'], items: { type: 'string' } } as const;

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

export function iso(ms: number | null): string | null {
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

export function decodeUtf8(b: Uint8Array): string | null {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(b);
  } catch {
    return null;
  }
}
