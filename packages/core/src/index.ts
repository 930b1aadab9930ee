export * from './errors/leoflow-error.js';
export * from './time/clock.js';
export * from './dag/index.js';
export * from './state/index.js';
export * from './schedule/index.js';
export * from './scheduling/index.js';
export * from './connections/index.js';
