import { stringify } from 'yaml';
import { CliError } from './client.js';

export const OUTPUT_FORMATS = ['table', 'json', 'yaml'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

export function isOutputFormat(v: unknown): v is OutputFormat {
  return typeof v === 'string' && (OUTPUT_FORMATS as readonly string[]).includes(v);
}

/** The format commands print in: what globalOpts() resolved (-o, else the profile's, else table). */
export function parseOutput(v: string | undefined): OutputFormat {
  const f = v ?? 'table';
  if (isOutputFormat(f)) return f;
  throw new CliError(
    `unknown output format "${f}"; use -o table, -o json or -o yaml`,
    2,
    'LF_USAGE',
  );
}

/** Prints data for scripts (json/yaml, the whole object) or people (a table of chosen columns). */
export function print(
  format: OutputFormat,
  data: unknown,
  table?: { rows: Record<string, unknown>[]; columns: string[] },
): void {
  if (format === 'json') {
    process.stdout.write(`${JSON.stringify(data, null, 2)}\n`);
    return;
  }
  if (format === 'yaml' || !table) {
    process.stdout.write(stringify(data));
    return;
  }
  process.stdout.write(renderTable(table.rows, table.columns));
}

export function renderTable(rows: Record<string, unknown>[], columns: string[]): string {
  if (rows.length === 0) return '(none)\n';
  const cells = rows.map((r) => columns.map((c) => cell(r[c])));
  const widths = columns.map((c, i) =>
    Math.max(c.length, ...cells.map((row) => row[i]?.length ?? 0)),
  );
  const line = (vals: string[]) =>
    vals
      .map((v, i) => v.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd();
  return [line(columns.map((c) => c.toUpperCase())), ...cells.map(line)].join('\n') + '\n';
}

function cell(v: unknown): string {
  if (v === null || v === undefined) return '-';
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  return JSON.stringify(v);
}
