export * from './trigger-rules.js';
export * from './plan-run.js';
export * from './retry.js';
export * from './credential-time.js';
