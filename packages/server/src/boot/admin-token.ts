import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import type { Logger } from 'pino';
import type { ApiTokens } from '../auth/api-tokens.js';

/**
 * Standalone's first start writes an admin token of the platform tenant (mode 0600) and puts it
 * on record so it can be revoked like any other; a token file from an earlier version, minted
 * before tokens were recorded, is adopted on the next start. A revoked admin token is never
 * re-minted behind the operator's back: delete the file to get a new one.
 */
export async function ensureAdminToken(
  file: string,
  tokens: ApiTokens,
  tenantId: string,
  logger: Logger,
): Promise<void> {
  const existing = existsSync(file) ? readFileSync(file, 'utf8').trim() : '';
  if (existing !== '') {
    if (!(await tokens.adopt(existing, 'admin'))) {
      logger.warn(
        { file },
        'the admin token file holds a token this server does not accept (revoked, or signed by a key no longer on the keyring); delete the file and restart to mint a new one',
      );
    }
    return;
  }
  const { token } = await tokens.create({
    tenant_id: tenantId,
    role: 'admin',
    name: 'admin',
    created_by: 'system:first-start',
  });
  try {
    // Exclusive: Pro replicas sharing a keys directory race to mint the first one; one wins.
    writeFileSync(file, `${token}\n`, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    await tokens.adopt(readFileSync(file, 'utf8').trim(), 'admin');
  }
}
