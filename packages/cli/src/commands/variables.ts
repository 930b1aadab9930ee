import { readFileSync, writeFileSync } from 'node:fs';
import type { Command } from 'commander';
import {
  formatAirflowVariablesExport,
  fromAirflowEnv,
  parseAirflowVariablesExport,
} from '@leoflow/core';
import { ApiClient, CliError } from '../client.js';
import { globalOpts } from '../global-options.js';
import { parseOutput, print } from '../output.js';
import { registerGrantCommands } from './grants.js';

const COLUMNS = ['key', 'value', 'is_secret', 'description', 'updated_at'];

export function registerVariables(program: Command): void {
  const vars = program
    .command('variables')
    .description('Variables: values tasks receive as AIRFLOW_VAR_<KEY>');

  vars
    .command('set <key> <value>')
    .description(
      'create or replace a variable (keys that look sensitive are stored sealed and shown masked)',
    )
    .option('--secret', 'store it encrypted and never show it in replies')
    .option('--description <text>', 'what it is for')
    .action(
      async (
        key: string,
        value: string,
        flags: { secret?: boolean; description?: string },
        cmd: Command,
      ) => {
        const g = globalOpts(cmd);
        const res = await new ApiClient(g).request<Record<string, unknown>>(
          'PUT',
          `/api/v1/variables/${encodeURIComponent(key)}`,
          {
            value,
            ...(flags.secret ? { secret: true } : {}),
            ...(flags.description !== undefined ? { description: flags.description } : {}),
          },
        );
        print(parseOutput(g.output), res, { rows: [res], columns: COLUMNS });
      },
    );

  vars
    .command('get <key>')
    .description('show a variable (secret values masked unless --reveal, which is audited)')
    .option('--reveal', 'show a secret value (admin only; audited)')
    .action(async (key: string, flags: { reveal?: boolean }, cmd: Command) => {
      const g = globalOpts(cmd);
      const res = await new ApiClient(g).request<Record<string, unknown>>(
        'GET',
        `/api/v1/variables/${encodeURIComponent(key)}${flags.reveal ? '?reveal=true' : ''}`,
      );
      print(parseOutput(g.output), res, { rows: [res], columns: COLUMNS });
    });

  vars
    .command('list')
    .description('list variables (secret values masked)')
    .action(async (_f: unknown, cmd: Command) => {
      const g = globalOpts(cmd);
      const variables = await new ApiClient(g).listAll<Record<string, unknown>>(
        '/api/v1/variables',
        'variables',
      );
      const res = { variables };
      print(parseOutput(g.output), res, { rows: res.variables, columns: COLUMNS });
    });

  vars
    .command('delete <key>')
    .description('delete a variable; tasks that declared it stop receiving it')
    .action(async (key: string, _f: unknown, cmd: Command) => {
      const g = globalOpts(cmd);
      await new ApiClient(g).request('DELETE', `/api/v1/variables/${encodeURIComponent(key)}`);
      print(
        parseOutput(g.output),
        { deleted: key },
        { rows: [{ deleted: key }], columns: ['deleted'] },
      );
    });

  vars
    .command('import [file]')
    .description(
      'import `airflow variables export` JSON, or AIRFLOW_VAR_* from your environment with --from-env',
    )
    .option('--from-env', 'take AIRFLOW_VAR_* from this shell (local development)')
    .action(async (file: string | undefined, flags: { fromEnv?: boolean }, cmd: Command) => {
      const g = globalOpts(cmd);
      let variables: { key: string; value: string }[];
      if (flags.fromEnv) variables = fromAirflowEnv(process.env).variables;
      else if (file) variables = parseAirflowVariablesExport(readFileSync(file, 'utf8'));
      else
        throw new CliError(
          'give a file (airflow variables export output) or --from-env',
          2,
          'LF_USAGE',
        );
      const res = await new ApiClient(g).request<{ imported: number }>(
        'POST',
        '/api/v1/variables/import',
        { variables },
      );
      print(parseOutput(g.output), res, { rows: [res], columns: ['imported'] });
    });

  vars
    .command('export <file>')
    .description(
      'write every variable, values included, in `airflow variables export` JSON (admin; audited)',
    )
    .action(async (file: string, _f: unknown, cmd: Command) => {
      const g = globalOpts(cmd);
      const res = await new ApiClient(g).request<{ variables: Record<string, string> }>(
        'POST',
        '/api/v1/variables/export',
      );
      // Every value a JSON string, laid out as `airflow variables export` lays out its file:
      // `airflow variables import` stores each exactly (checked by the Airflow oracle).
      writeFileSync(file, formatAirflowVariablesExport(res.variables), { mode: 0o600 });
      const out = { exported: Object.keys(res.variables).length, file };
      print(parseOutput(g.output), out, { rows: [out], columns: ['exported', 'file'] });
    });

  registerGrantCommands(vars, 'variables', 'key');
}
