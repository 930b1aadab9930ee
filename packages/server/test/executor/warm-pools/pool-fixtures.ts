import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { loadSigningKeyring } from '../../../src/auth/signing-keys.js';
import { WorkerTokenIssuer } from '../../../src/auth/worker-token.js';
import type { WarmPoolConfig } from '../../../src/config/warm-pool-config.js';
import { T0 } from '../../auth/fixtures.js';

/** The pool the warm-pool tests share: tenant acme's `etl` service account on one image. */
export const ACME_POOL: WarmPoolConfig = {
  tenant: 'acme',
  namespace: 'acme-tasks',
  serviceAccount: 'etl',
  image: 'leoflow/agent:1',
  minIdle: 2,
  maxSize: 3,
  maxAttemptsPerWorker: 2,
  maxWorkerLifetimeMs: 3_600_000,
  idleTtlMs: 300_000,
};

/**
 * A worker token issuer on an agent keyring of its own (made at T0), for one test file: call it
 * at the file's top level; its key directory is removed after the file.
 */
export async function workerTokenIssuer(): Promise<WorkerTokenIssuer> {
  const dir = mkdtempSync(join(tmpdir(), 'leoflow-worker-keys-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return new WorkerTokenIssuer(await loadSigningKeyring(dir, 'agent', { nowMs: T0 }));
}
