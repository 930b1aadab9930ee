import { fileURLToPath } from 'node:url';
import { defaultServerConditions, defineConfig } from 'vite';

// Tests import workspace packages from their TypeScript sources (the "source" export
// condition), so `vitest` never runs against stale dist/ output of a sibling package.
const conditions = ['source', ...defaultServerConditions];

export default defineConfig({
  resolve: {
    conditions,
    // The web app's subpaths into the core (packages/ui/vite.config.ts has the same aliases).
    alias: {
      '@leoflow/core/connections-import': fileURLToPath(
        new URL('./packages/core/src/connections/import.ts', import.meta.url),
      ),
      '@leoflow/core/declared-set': fileURLToPath(
        new URL('./packages/core/src/credentials/declared-set.ts', import.meta.url),
      ),
    },
  },
  ssr: { resolve: { conditions, externalConditions: conditions } },
  test: {
    include: [
      'packages/*/test/**/*.test.ts',
      'packages/ui/test/**/*.test.tsx',
      'test/**/*.test.ts',
    ],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    reporters: ['default', './test/support/plain-summary-reporter.ts'],
  },
});
