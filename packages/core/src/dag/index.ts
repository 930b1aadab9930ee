export * from './spec.js';
