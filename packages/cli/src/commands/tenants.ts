import type { Command } from 'commander';
import { ApiClient } from '../client.js';
import { globalOpts } from '../global-options.js';
import { parseOutput, print } from '../output.js';

export function registerTenants(program: Command): void {
  const tenants = program
    .command('tenants')
    .description('tenants: teams whose DAGs, runs, logs and secrets never meet (platform admins)');

  tenants
    .command('create <id>')
    .description(
      'create a tenant, then mint its first token with `leoflow auth create-token --tenant <id> --role admin`',
    )
    .option('--name <name>', 'a display name (default: the id)')
    .action(async (id: string, flags: { name?: string }, cmd: Command) => {
      const g = globalOpts(cmd);
      const res = await new ApiClient(g).request<Record<string, unknown>>(
        'POST',
        '/api/v1/tenants',
        {
          id,
          ...(flags.name !== undefined ? { name: flags.name } : {}),
        },
      );
      print(parseOutput(g.output), res, { rows: [res], columns: ['id', 'name', 'created_at'] });
    });

  tenants
    .command('list')
    .description('every tenant')
    .action(async (_f: unknown, cmd: Command) => {
      const g = globalOpts(cmd);
      const tenants = await new ApiClient(g).listAll<Record<string, unknown>>(
        '/api/v1/tenants',
        'tenants',
      );
      const res = { tenants };
      print(parseOutput(g.output), res, {
        rows: res.tenants,
        columns: ['id', 'name', 'created_at'],
      });
    });

  tenants
    .command('place <tenant> <cell>')
    .description(
      "send the tenant's runners' next sessions to <cell>; moves no data (DAGs, vault, history stay; docs/runners.md)",
    )
    .action(async (tenant: string, cell: string, _f: unknown, cmd: Command) => {
      const g = globalOpts(cmd);
      const res = await new ApiClient(g).request<Record<string, unknown>>(
        'PUT',
        `/api/v1/tenants/${encodeURIComponent(tenant)}/placement`,
        { cell },
      );
      print(parseOutput(g.output), res, {
        rows: [res],
        columns: ['tenant_id', 'cell', 'placed_by', 'placed_at'],
      });
    });
}
