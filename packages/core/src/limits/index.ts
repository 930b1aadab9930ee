export {
  assertJsonDepth,
  JSON_TOO_DEEP,
  jsonNestingDepth,
  MAX_JSON_DEPTH,
  MAX_REST_BODY_BYTES,
  parseJsonWithinDepth,
} from './request-limits.js';
