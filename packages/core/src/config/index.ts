export * from './duration.js';
export * from './credential-plane.js';
export * from './attempt-isolation.js';
export * from './settings.js';
