import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import {
  DAG_ERROR_CODES,
  declaredUnion,
  MAX_REST_BODY_BYTES,
  formatDiagnostic,
  type CompileDiagnostic,
  type DagSpec,
} from '@leoflow/core';
import { compileDagFolder } from '@leoflow/server/dags';
import { ApiClient, CliError } from '../client.js';
import { parseOutput, print } from '../output.js';
import { globalOpts } from '../global-options.js';
import { registerDagsTest } from './dags-test.js';

interface ImportErrorView {
  file: string;
  dag_id: string | null;
  diagnostics: Omit<CompileDiagnostic, 'severity'>[];
}

function compileOrFail(
  dir: string,
  format: 'json' | 'table' | 'yaml',
): { spec: DagSpec; warnings: CompileDiagnostic[]; file: string } {
  let result;
  try {
    result = compileDagFolder(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new CliError(
        `no leoflow.yaml in ${resolve(dir)}; a DAG is a folder holding leoflow.yaml`,
        1,
        'LF_DAG_FILE_NOT_FOUND',
      );
    }
    throw err;
  }
  if (!result.ok) {
    if (format === 'json') {
      process.stdout.write(
        `${JSON.stringify({ ok: false, errors: result.errors, warnings: result.warnings }, null, 2)}\n`,
      );
    } else {
      for (const d of [...result.errors, ...result.warnings])
        process.stderr.write(`${formatDiagnostic(d)}\n`);
      process.stderr.write(`${result.errors.length} error(s); nothing written\n`);
    }
    // A file over the size limit is a usage error (exit 2): it was refused before being read.
    const tooLarge = result.errors.find((e) => e.code === DAG_ERROR_CODES.FILE_TOO_LARGE);
    if (tooLarge) throw new CliError('', 2, tooLarge.code);
    throw new CliError('', 1, 'LF_DAG_INVALID');
  }
  if (format !== 'json')
    for (const w of result.warnings) process.stderr.write(`${formatDiagnostic(w)}\n`);
  return { spec: result.spec, warnings: result.warnings, file: result.file };
}

/**
 * When a control plane is reachable, warn about declared names its vault does not have (the
 * push would be refused). Unreachable or unauthorised: say nothing — compiling is offline work.
 */
async function warnAboutUnknownDeclarations(client: ApiClient, spec: DagSpec): Promise<string[]> {
  const warnings: string[] = [];
  try {
    const vars = await client.listAll<{ key: string }>('/api/v1/variables', 'variables');
    const conns = await client.listAll<{ conn_id: string }>('/api/v1/connections', 'connections');
    const haveVars = new Set(vars.map((v) => v.key));
    const haveConns = new Set(conns.map((c) => c.conn_id));
    const missingVars = declaredUnion(spec, 'variables').filter((k) => !haveVars.has(k));
    const missingConns = declaredUnion(spec, 'connections').filter((c) => !haveConns.has(c));
    if (missingVars.length > 0) {
      warnings.push(
        `warning: ${client.baseUrl} has no variable(s) ${missingVars.join(', ')}; \`leoflow dags push\` will be refused until you run \`leoflow variables set <key> <value>\``,
      );
    }
    if (missingConns.length > 0) {
      warnings.push(
        `warning: ${client.baseUrl} has no connection(s) ${missingConns.join(', ')}; \`leoflow dags push\` will be refused until you run \`leoflow connections set <id> --uri <uri>\``,
      );
    }
  } catch {
    // No reachable vault: nothing to compare against.
  }
  return warnings;
}

export function registerDags(program: Command): void {
  const dags = program.command('dags').description('author, validate, register and list DAGs');

  dags
    .command('compile <dir>')
    .description('compile <dir>/leoflow.yaml to <dir>/dag.json (validated against dag.schema.json)')
    .option('--out <file>', 'write dag.json here instead of <dir>/dag.json')
    .action(async (dir: string, flags: { out?: string }, cmd: Command) => {
      const format = parseOutput(globalOpts(cmd).output);
      const { spec, warnings } = compileOrFail(dir, format);
      const out = resolve(flags.out ?? join(dir, 'dag.json'));
      writeFileSync(out, `${JSON.stringify(spec, null, 2)}\n`);
      const vaultWarnings = await warnAboutUnknownDeclarations(
        new ApiClient(globalOpts(cmd)),
        spec,
      );
      for (const w of vaultWarnings) process.stderr.write(`${w}\n`);
      if (format === 'json') {
        process.stdout.write(
          `${JSON.stringify({ ok: true, dag_id: spec.dag_id, out, tasks: spec.tasks.length, warnings }, null, 2)}\n`,
        );
      } else {
        process.stdout.write(`compiled ${spec.dag_id} (${spec.tasks.length} tasks) → ${out}\n`);
      }
    });

  dags
    .command('validate <dir>')
    .description('check <dir>/leoflow.yaml without writing anything')
    .action((dir: string, _flags: unknown, cmd: Command) => {
      const format = parseOutput(globalOpts(cmd).output);
      const { spec, warnings } = compileOrFail(dir, format);
      if (format === 'json') {
        process.stdout.write(
          `${JSON.stringify({ ok: true, dag_id: spec.dag_id, warnings }, null, 2)}\n`,
        );
      } else {
        process.stdout.write(`${spec.dag_id}: valid (${spec.tasks.length} tasks)\n`);
      }
    });

  dags
    .command('push <dir>')
    .description('compile <dir> and register it as a new DAG version (no-op when unchanged)')
    .action(async (dir: string, _flags: unknown, cmd: Command) => {
      const g = globalOpts(cmd);
      const format = parseOutput(g.output);
      const { spec } = compileOrFail(dir, format);
      // Checked here, not discovered as a refused upload: the server takes no larger body.
      const bytes = Buffer.byteLength(JSON.stringify(spec));
      if (bytes > MAX_REST_BODY_BYTES) {
        throw new CliError(
          `the compiled DAG is ${bytes} bytes, over the server's ${MAX_REST_BODY_BYTES} byte (8 MiB) request limit; make its scripts smaller`,
          2,
          'LF_DAG_TOO_LARGE',
        );
      }
      const res = await new ApiClient(g).request<{
        dag_id: string;
        version: number;
        created: boolean;
      }>('POST', '/api/v1/dags', spec);
      if (format === 'table') {
        process.stdout.write(
          res.created
            ? `${res.dag_id}: registered version ${res.version}\n`
            : `${res.dag_id}: unchanged (version ${res.version})\n`,
        );
      } else print(format, res);
    });

  registerDagsTest(dags, compileOrFail);

  dags
    .command('list')
    .description('list registered DAGs (and how many DAG files do not load)')
    .action(async (_flags: unknown, cmd: Command) => {
      const g = globalOpts(cmd);
      const client = new ApiClient(g);
      const dags = await client.listAll<Record<string, unknown>>('/api/v1/dags', 'dags');
      const reply = await client.request<{ import_errors?: unknown }>(
        'GET',
        '/api/v1/import-errors',
      );
      // A server from before the watched folder has no such list: the count is unknown (null).
      const import_errors = Array.isArray(reply.import_errors) ? reply.import_errors : null;
      const format = parseOutput(g.output);
      const res = { dags, import_errors: import_errors?.length ?? null };
      print(format, res, {
        rows: res.dags,
        columns: ['dag_id', 'current_version', 'is_paused', 'is_active', 'updated_at'],
      });
      if (format === 'table' && import_errors !== null && import_errors.length > 0) {
        process.stderr.write(
          `${import_errors.length} DAG file(s) do not load: see \`leoflow dags errors\`\n`,
        );
      }
    });

  dags
    .command('errors')
    .description('DAG files in the DAGs folder that do not load: file:line:column, code, hint')
    .action(async (_flags: unknown, cmd: Command) => {
      const g = globalOpts(cmd);
      const format = parseOutput(g.output);
      const res = await new ApiClient(g).request<{ import_errors: ImportErrorView[] }>(
        'GET',
        '/api/v1/import-errors',
      );
      if (format !== 'table') {
        print(format, res);
        return;
      }
      if (res.import_errors.length === 0) {
        process.stdout.write('no import errors: every DAG file in the DAGs folder loads\n');
        return;
      }
      for (const e of res.import_errors) {
        for (const d of e.diagnostics)
          process.stdout.write(`${formatDiagnostic({ ...d, severity: 'error' })}\n`);
      }
      process.stdout.write(
        `${res.import_errors.length} DAG file(s) do not load; fix and save: the DAGs folder is watched\n`,
      );
    });

  for (const [name, paused] of [
    ['pause', true],
    ['unpause', false],
  ] as const) {
    dags
      .command(`${name} <dag_id>`)
      .description(paused ? 'stop creating scheduled runs' : 'resume scheduled runs')
      .action(async (dagId: string, _flags: unknown, cmd: Command) => {
        const g = globalOpts(cmd);
        const res = await new ApiClient(g).request<Record<string, unknown>>(
          'PATCH',
          `/api/v1/dags/${encodeURIComponent(dagId)}`,
          { is_paused: paused },
        );
        print(parseOutput(g.output), res, {
          rows: [res],
          columns: ['dag_id', 'current_version', 'is_paused'],
        });
      });
  }
}
