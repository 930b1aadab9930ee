// `npm run bundle -w @leoflow/sdk`: @leoflow/sdk and its dependencies (core, google-auth-library)
// as one self-contained ES module, dist/leoflow-sdk.mjs. The control plane copies it under the
// work root so node tasks can `import '@leoflow/sdk'` even when the installation itself sits in a
// directory their uid cannot traverse (a checkout under /root).
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const pkg = join(dirname(fileURLToPath(import.meta.url)), '..');
await build({
  absWorkingDir: pkg,
  entryPoints: ['src/index.ts'],
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  conditions: ['source'],
  outfile: join(pkg, 'dist', 'leoflow-sdk.mjs'),
  logLevel: 'warning',
  // Bundled CommonJS dependencies call require() for Node built-ins; give them a real one.
  banner: {
    js: "import { createRequire as __leoflowCreateRequire } from 'node:module';\nconst require = __leoflowCreateRequire(import.meta.url);",
  },
});
