import { ERROR_CATALOGUE, type ErrorFamily } from './catalogue.js';

const FAMILY_TITLES: Record<ErrorFamily, string> = {
  config: 'Configuration (`ConfigError`)',
  dag: 'DAGs (`DagError`; compiler diagnostics use the same codes)',
  vault: 'Vault: variables, connections, secret key (`VaultError`)',
  auth: 'Authentication and authorization (`AuthError`)',
  liveness: 'Attempt liveness (`LivenessError`)',
  store: 'Metadata store (`StoreError`)',
  run: 'Runs and task instances',
  request: 'Requests',
  cli: 'Command line',
  sdk: 'Task SDK',
  internal: 'Internal',
};

/** docs/errors.md, rendered from the catalogue (scripts/gen-error-docs.mjs writes it). */
export function renderErrorCatalogueMarkdown(): string {
  const out: string[] = [
    '# Error codes',
    '',
    '<!-- Generated from packages/core/src/errors/catalogue.ts by `npm run docs:errors`; do not edit. -->',
    '',
    'Every error Leoflow reports carries a stable `LF_…` code and a message that says what to do',
    'next. The REST API answers `{ "code", "message", "details" }` with the HTTP status below',
    '(docs/api.md). The gRPC column is the Connect status the agent port answers for the same',
    'refusal (its replies carry that status and a message, not the code). "—" means the code',
    'never travels over that protocol (the CLI, the SDK or the agent reports it locally).',
    '',
  ];
  const families = Object.keys(FAMILY_TITLES) as ErrorFamily[];
  const entries = Object.entries(ERROR_CATALOGUE).sort(([a], [b]) => a.localeCompare(b));
  for (const family of families) {
    const rows = entries.filter(([, s]) => s.family === family);
    if (rows.length === 0) continue;
    out.push(
      `## ${FAMILY_TITLES[family]}`,
      '',
      '| Code | HTTP | gRPC | What to do |',
      '| --- | --- | --- | --- |',
    );
    for (const [code, s] of rows) {
      const grpc = 'grpc' in s ? s.grpc : undefined;
      const fix = s.fix.replace(/\|/g, '\\|');
      out.push(`| \`${code}\` | ${s.http ?? '—'} | ${grpc ?? '—'} | ${fix} |`);
    }
    out.push('');
  }
  return out.join('\n');
}
