import { agentTokenTtlSeconds, type Clock } from '@leoflow/core';
import type { Logger } from 'pino';
import { AGENT_TOKEN_CLOCK_TOLERANCE_SECONDS } from '../auth/agent-token.js';
import { ApiTokens } from '../auth/api-tokens.js';
import {
  keyRetentionSeconds,
  loadSigningKeyring,
  type FileSigningKeyring,
} from '../auth/signing-keys.js';
import { UserTokenIssuer } from '../auth/user-token.js';
import type { ServerConfig } from '../config/server-config.js';
import type { Store } from '../store/store.js';
import { loadKeyring } from '../vault/index.js';
import type { Keyring } from '../vault/keyring.js';
import type { KeyringSource } from '../vault/load-keyring.js';
import { reloadSigningKeyringOnChange } from '../vault/key-reload.js';
import type { Lifecycle } from './lifecycle.js';

export interface Keys {
  /** Pro: one keys directory every replica shares, so a token one signs verifies on all */
  keysDir: string;
  /** the per-attempt token's TTL, from the heartbeat interval */
  agentTokenTtlSeconds: number;
  agentKeys: FileSigningKeyring;
  userKeys: FileSigningKeyring;
  apiTokens: ApiTokens;
  vault: { keyring: Keyring; file: string | undefined; source: KeyringSource };
  /** reads the vault keyring again (a rotation by another process) */
  reloadVaultKeyring: () => Promise<Keyring>;
}

/** Phase 2: the signing keyrings (watched for rotations) and the vault keyring. */
export async function loadKeys(
  cfg: ServerConfig,
  store: Store,
  clock: Clock,
  logger: Logger,
  life: Lifecycle,
): Promise<Keys> {
  const ttlSeconds = agentTokenTtlSeconds(cfg.execution.heartbeatIntervalMs / 1000);
  const keysDir = cfg.pro?.keysDir ?? cfg.dataDir;
  const agentKeys = await loadSigningKeyring(keysDir, 'agent', {
    retainSeconds: keyRetentionSeconds(ttlSeconds, AGENT_TOKEN_CLOCK_TOLERANCE_SECONDS),
    clock: () => clock.now(),
  });
  // Retained forever: the admin token has no exp.
  const userKeys = await loadSigningKeyring(keysDir, 'user');
  const apiTokens = new ApiTokens(store, new UserTokenIssuer(userKeys), clock);
  // Rotations by another process (a replica, the CLI) reach this one without a restart.
  const watches = [agentKeys, userKeys].map((ring) =>
    reloadSigningKeyringOnChange(ring, {
      onError: (err) =>
        logger.error({ err, purpose: ring.purpose }, 'signing keyring reload failed'),
      onApplied: (kid) => logger.info({ kid, purpose: ring.purpose }, 'signing keyring reloaded'),
    }),
  );
  life.add({
    name: 'signing key watches',
    stop: () => {
      for (const w of watches) w.close();
    },
  });
  // No fixed key: Lite generates its vault keyring on first start (mode 0600).
  const load = () =>
    loadKeyring({ edition: cfg.pro ? 'pro' : 'lite', dataDir: cfg.dataDir, env: process.env });
  const { keyring, file, created, source } = await load();
  if (created) logger.info({ file }, 'generated the vault encryption keyring');
  return {
    keysDir,
    agentTokenTtlSeconds: ttlSeconds,
    agentKeys,
    userKeys,
    apiTokens,
    vault: { keyring, file, source },
    reloadVaultKeyring: async () => (await load()).keyring,
  };
}
