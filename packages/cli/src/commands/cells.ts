import type { Command } from 'commander';
import { ApiClient } from '../client.js';
import { globalOpts } from '../global-options.js';
import { parseOutput, print } from '../output.js';

const COLUMNS = ['name', 'state', 'tenants', 'url', 'implicit'];

export function registerCells(program: Command): void {
  const cells = program
    .command('cells')
    .description('cells: control-plane deployments the door routes tenants to (platform admins)');

  cells
    .command('list')
    .description('every cell and how many tenants it holds (Lite: its one implicit cell)')
    .action(async (_f: unknown, cmd: Command) => {
      const g = globalOpts(cmd);
      const res = await new ApiClient(g).request<{ cells: Record<string, unknown>[] }>(
        'GET',
        '/api/v1/cells',
      );
      print(parseOutput(g.output), res, { rows: res.cells, columns: COLUMNS });
    });

  cells
    .command('add <name> <url>')
    .description("add a cell to the directory; <url> is the cell's internal door endpoint")
    .action(async (name: string, url: string, _f: unknown, cmd: Command) => {
      const g = globalOpts(cmd);
      const res = await new ApiClient(g).request<Record<string, unknown>>('POST', '/api/v1/cells', {
        name,
        url,
      });
      print(parseOutput(g.output), res, { rows: [res], columns: COLUMNS });
    });

  cells
    .command('drain <name>')
    .description('the cell takes no new placements; move its tenants with `leoflow tenants place`')
    .action(async (name: string, _f: unknown, cmd: Command) => {
      const g = globalOpts(cmd);
      const res = await new ApiClient(g).request<Record<string, unknown>>(
        'POST',
        `/api/v1/cells/${encodeURIComponent(name)}/drain`,
      );
      print(parseOutput(g.output), res, { rows: [res], columns: COLUMNS });
    });
}
