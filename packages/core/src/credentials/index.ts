export * from './declared-set.js';
export * from './scoping-policy.js';
export * from './grants.js';
export * from './secret-masker.js';
