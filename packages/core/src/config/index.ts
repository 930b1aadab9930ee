export * from './duration.js';
export * from './credential-plane.js';
