/**
 * Globals esbuild substitutes in the bundled agent (`--inject`): references to `Headers` in the
 * bundle resolve to LiteHeaders instead of Node's lazy undici-backed global. Nothing is assigned
 * to globalThis.
 */
export { LiteHeaders as Headers } from './lite-headers.js';
