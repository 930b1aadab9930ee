export * from './trigger-rules.js';
export * from './plan-run.js';
export * from './retry.js';
export * from './credential-time.js';
export * from './branching.js';
export { sha1Hex } from './sha1.js';
export * from './mapping.js';
