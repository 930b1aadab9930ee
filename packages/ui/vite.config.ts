import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

// No React plugin: esbuild compiles the JSX (the production build needs no Fast Refresh), which
// keeps the install small and the build fast. Only the core's timetable is bundled (the same
// code the scheduler runs, for "next run") and, lazily, its connections-file parser; never the
// whole core package.
export default defineConfig({
  esbuild: { jsx: 'automatic' },
  resolve: {
    alias: {
      '@leoflow/core/timetable': fileURLToPath(
        new URL('../core/src/schedule/timetable.ts', import.meta.url),
      ),
      // The CLI's own parser of `airflow connections export` files, loaded when the Connections
      // import form opens (it brings a YAML parser along).
      '@leoflow/core/connections-import': fileURLToPath(
        new URL('../core/src/connections/import.ts', import.meta.url),
      ),
      // Which names a task is delivered (the task's list, else the DAG's): the function secret
      // delivery runs, so the DAG page shows exactly what delivery computes.
      '@leoflow/core/declared-set': fileURLToPath(
        new URL('../core/src/credentials/declared-set.ts', import.meta.url),
      ),
    },
  },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
    chunkSizeWarningLimit: 600,
    rollupOptions: {
      onwarn(warning, warn) {
        // React libraries mark modules "use client" for server components; meaningless here.
        if (warning.code === 'MODULE_LEVEL_DIRECTIVE') return;
        warn(warning);
      },
    },
  },
});
