import { agentChannel } from './agent-channel.js';
import { redactedConfig, reportedSettings } from './config.js';
import { credentialSettings } from './credential-settings.js';
import { dagsFolder } from './dags-folder.js';
import { datastore } from './datastore.js';
import { safeStat } from './facts.js';
import { Findings, type SectionContext } from './findings.js';
import { dataDirAndKeyFiles } from './key-files.js';
import { kubernetesAccess } from './kubernetes-access.js';
import { listeners } from './listeners.js';
import { databaseUrlSecrets, scrub } from './redact.js';
import { taskIsolation } from './task-isolation.js';
import { sandboxSection } from './sandbox.js';
import type { DoctorDeps, DoctorOptions, DoctorReport, Posture } from './types.js';
import type { ServerConfig } from '../config/server-config.js';

export type * from './types.js';
export { redactedConfig } from './config.js';
export { NOT_IN_THIS_BUILD, tokenTransportOf } from './credential-settings.js';

/**
 * Builds `leoflow doctor`'s report for a Lite configuration: the effective settings (secrets
 * redacted), the credential plane's posture with every residual exposure, and health checks.
 * Read-only: it stats files and opens the datastore, nothing else.
 *
 * Each section lives in its own module and reports into one Findings; this function only runs
 * them in report order (checks keep that order) and assembles the result:
 *   key-files.ts           data dir, keys dir, key files, vault key source; where keys sit
 *   datastore.ts           reachable, migrated, secure_delete (+ undeclared-use.ts, D5)
 *   agent-channel.ts       TLS / loopback / routable cleartext (mode from rpc/agent-server.ts)
 *   task-isolation.ts      run-as user, per-attempt uids, nproc, cgroups, work root, task SDK
 *   credential-settings.ts scoping, liveness, TTL, ceiling, token transport per executor
 *   kubernetes-access.ts   the executor's rights in each tenant namespace (SelfSubjectAccessReview)
 *   listeners.ts           REST and metrics ports off loopback, the database password
 *   dags-folder.ts         the DAGs folder
 *   config.ts              the redacted effective configuration
 */
export async function buildDoctorReport(
  cfg: ServerConfig,
  deps: DoctorDeps,
  opts: DoctorOptions = {},
): Promise<DoctorReport> {
  const findings = new Findings();
  const ctx: SectionContext = {
    cfg,
    deps,
    opts,
    stat: safeStat(deps),
    check: findings.check,
    expose: findings.expose,
  };

  const keyFiles = await dataDirAndKeyFiles(ctx);
  await datastore(ctx, keyFiles);
  const channel = await agentChannel(ctx);
  const tasks = await taskIsolation(ctx);
  const sandbox = await sandboxSection(ctx);
  const credentials = credentialSettings(ctx);
  await kubernetesAccess(ctx);
  listeners(ctx);
  await dagsFolder(ctx);

  const posture: Posture = {
    ...credentials,
    key_storage: keyFiles.keyStorage,
    agent_channel: channel,
    tasks_run_as: tasks.tasksRunAs,
    isolation: tasks.isolation,
    ...(sandbox ? { sandbox } : {}),
    exposures: findings.sortExposures(),
  };

  // Defence in depth: nothing a driver or a path said may carry the database password out.
  const dbSecrets = cfg.database.kind === 'postgres' ? databaseUrlSecrets(cfg.database.url) : [];
  const clean = (s: string) => scrub(s, dbSecrets);
  const cleanChecks = findings.checks.map((c) => ({ ...c, message: clean(c.message) }));
  for (const e of posture.exposures) {
    e.sentence = clean(e.sentence);
    e.remedy = clean(e.remedy);
  }
  return {
    edition: 'lite',
    config: redactedConfig(cfg),
    ...(cfg.settings ? { settings: reportedSettings(cfg.settings, clean) } : {}),
    posture,
    checks: cleanChecks,
    summary: {
      ok: cleanChecks.filter((c) => c.status === 'ok').length,
      warn: cleanChecks.filter((c) => c.status === 'warn').length,
      fail: cleanChecks.filter((c) => c.status === 'fail').length,
    },
  };
}
