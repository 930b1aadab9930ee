import { LeoflowError } from '../errors/leoflow-error.js';

/**
 * Deepest nesting of objects and arrays accepted in JSON a user sends (REST bodies, run conf,
 * a Connection's Airflow JSON). Real documents stay far below it; a document nested thousands
 * deep would otherwise overflow the stack of a recursive walk (JSON.stringify, validation).
 */
export const MAX_JSON_DEPTH = 64;

/** Stable code of the refusal; the REST API answers it with 400. */
export const JSON_TOO_DEEP = 'LF_JSON_TOO_DEEP';

/**
 * The deepest `{`/`[` nesting of a JSON text, counted without parsing (brackets inside strings
 * do not count) and without recursion, stopping as soon as `limit` is passed. Returns
 * `limit + 1` when the text is deeper than `limit`.
 */
export function jsonNestingDepth(text: string, limit = MAX_JSON_DEPTH): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c /* \ */) i++;
      else if (c === 0x22 /* " */) inString = false;
      continue;
    }
    if (c === 0x22) inString = true;
    else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      depth++;
      if (depth > max) {
        max = depth;
        if (max > limit) return limit + 1;
      }
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) depth--;
  }
  return max;
}

/** Throws LF_JSON_TOO_DEEP when `text` nests deeper than `limit`; `what` names the input. */
export function assertJsonDepth(text: string, what: string, limit = MAX_JSON_DEPTH): void {
  if (jsonNestingDepth(text, limit) > limit) {
    throw new LeoflowError(
      JSON_TOO_DEEP,
      `${what} nests objects/arrays more than ${limit} deep; flatten it (the limit is ${limit} levels)`,
      { max_depth: limit },
    );
  }
}

/** JSON.parse after the depth check: a too-deep text is refused before it is parsed. */
export function parseJsonWithinDepth(text: string, what: string, limit = MAX_JSON_DEPTH): unknown {
  assertJsonDepth(text, what, limit);
  return JSON.parse(text) as unknown;
}

/** Largest REST request body the control plane reads (a compiled DAG travels as one). */
export const MAX_REST_BODY_BYTES = 8 * 1024 * 1024;
