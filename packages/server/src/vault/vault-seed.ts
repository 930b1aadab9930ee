import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAirflowConnectionsExport, parseAirflowVariablesExport } from '@leoflow/core';
import type { Logger } from 'pino';
import type { VaultService } from './vault-service.js';

/**
 * Development convenience (`--vault-seed <dir>`): imports `connections.json` / `variables.json`
 * in Airflow's export format for names the tenant does not have yet. Never overwrites, so an
 * operator's own value always wins over a seed.
 */
export async function seedVault(
  vault: VaultService,
  tenantId: string,
  dir: string,
  now: number,
  logger: Logger,
): Promise<{ connections: number; variables: number }> {
  let connections = 0;
  let variables = 0;
  const connFile = join(dir, 'connections.json');
  if (existsSync(connFile)) {
    for (const { id, conn } of parseAirflowConnectionsExport(
      readFileSync(connFile, 'utf8'),
      'json',
    )) {
      if (await vault.getConnection(tenantId, id)) continue;
      await vault.setConnection(tenantId, id, conn, 'seeded from --vault-seed', now);
      connections++;
    }
  }
  const varFile = join(dir, 'variables.json');
  if (existsSync(varFile)) {
    for (const { key, value } of parseAirflowVariablesExport(readFileSync(varFile, 'utf8'))) {
      if (await vault.getVariable(tenantId, key)) continue;
      await vault.setVariable(
        tenantId,
        key,
        value,
        { secret: false, description: 'seeded from --vault-seed' },
        now,
      );
      variables++;
    }
  }
  if (connections + variables > 0) logger.info({ dir, connections, variables }, 'seeded the vault');
  return { connections, variables };
}
