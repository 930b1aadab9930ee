import { existsSync } from 'node:fs';

/** The SDK bundle `npm run build` writes (packages/sdk/dist/leoflow-sdk.mjs), or null. */
export function defaultSdkBundle(): string | null {
  // packages/server/dist/config → packages/sdk/dist/leoflow-sdk.mjs
  const p = new URL('../../../sdk/dist/leoflow-sdk.mjs', import.meta.url).pathname;
  return existsSync(p) ? p : null;
}
