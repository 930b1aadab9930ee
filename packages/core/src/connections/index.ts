export * from './connection.js';
