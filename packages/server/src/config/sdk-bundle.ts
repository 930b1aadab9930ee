import { existsSync } from 'node:fs';

/** The SDK bundle `npm run build` writes (packages/sdk/dist/leoflow-sdk.mjs), or null. */
export function defaultSdkBundle(): string | null {
  // packages/server/dist/config → packages/sdk/dist/leoflow-sdk.mjs
  const p = new URL('../../../sdk/dist/leoflow-sdk.mjs', import.meta.url).pathname;
  return existsSync(p) ? p : null;
}

/** The Python task SDK's package folder (python/leoflow/src/leoflow in the checkout), or null. */
export function defaultPythonSdk(): string | null {
  // packages/server/dist/config → python/leoflow/src/leoflow
  const p = new URL('../../../../python/leoflow/src/leoflow/', import.meta.url).pathname;
  return existsSync(`${p}__init__.py`) ? p.replace(/\/$/, '') : null;
}
