import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      '**/dist/**',
      '**/node_modules/**',
      'packages/protocol/src/gen/**',
      '.leoflow/**',
      'bench/results/**',
      'examples/**',
      'packages/ui/src/api-types.ts',
      'packages/ui/vite.config.ts',
    ],
  },
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': [
        'error',
        { checksVoidReturn: { arguments: false } },
      ],
      '@typescript-eslint/switch-exhaustiveness-check': [
        'error',
        { considerDefaultExhaustiveForUnions: true },
      ],
      // Signal and crash handlers are installed before the object they reach is built.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
    },
  },
  {
    // core is pure: no I/O, no clock, no platform modules.
    files: ['packages/core/src/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['node:*', 'fs', 'child_process', 'net', 'http', 'http2'],
              message: 'core stays pure: pass I/O in from the server or CLI',
            },
            {
              group: ['@leoflow/server', '@leoflow/agent', '@leoflow/cli'],
              message: 'core imports only protocol',
            },
          ],
        },
      ],
      'no-restricted-globals': ['error', { name: 'process', message: 'core stays pure' }],
    },
  },
  {
    // Code that runs beside user code never imports the control plane.
    files: ['packages/agent/src/**/*.ts', 'packages/protocol/src/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['@leoflow/server', '@leoflow/cli'],
              message: 'the agent never imports control-plane code',
            },
          ],
        },
      ],
    },
  },
  {
    // Tenancy by construction: request handlers reach data only through a TenantScope (or
    // PlatformAdmin behind a platform permission), never the store or the vault directly.
    // api/tenancy/ is where those scopes are built from the store's ports; the web session
    // store (api/web-session/sessions.ts) holds no tenant data.
    files: ['packages/server/src/api/**/*.ts'],
    ignores: [
      'packages/server/src/api/tenancy/**',
      'packages/server/src/api/web-session/sessions.ts',
    ],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: [
                '**/store/*',
                '**/store/**',
                '**/vault/*',
                '**/vault/**',
                '!../store/types.js',
                '!../../store/types.js',
              ],
              message:
                'API handlers use req.scope (TenantScope) so no query can forget its tenant; add a method there',
              allowTypeImports: false,
            },
          ],
        },
      ],
    },
  },
  {
    // Composition lives in boot/ alone; .dependency-cruiser.cjs holds the layers and cycles.
    files: ['packages/server/src/**/*.ts'],
    ignores: ['packages/server/src/index.ts', 'packages/server/src/boot/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/boot/*', '**/boot/**'],
              message:
                'only the entry point (index.ts) imports boot/: build and do here, wire in boot/',
            },
          ],
        },
      ],
    },
  },
  {
    // Vitest's asymmetric matchers (expect.any, objectContaining…) are typed `any`.
    files: ['**/test/**/*.ts', 'test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/require-await': 'off',
    },
  },
  {
    files: ['**/*.js', '**/*.mjs', '**/*.cjs', 'vitest.config.ts', 'eslint.config.js'],
    ...tseslint.configs.disableTypeChecked,
  },
);
