export * from './task-state.js';
export * from './transitions.js';
