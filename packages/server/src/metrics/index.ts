export * from './credential-metrics.js';
export * from './metrics-server.js';
