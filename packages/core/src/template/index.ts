export * from './parse.js';
export * from './context.js';
export * from './render.js';
export { pyStrftime, pyStrptime } from './strftime.js';
