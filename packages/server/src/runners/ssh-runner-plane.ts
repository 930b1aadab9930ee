import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Connection } from '@leoflow/core';
import type { Logger } from 'pino';
import type { RunnerStore } from '../store/ports/runners.js';
import { SshRunnerDialer, type SshRunner } from './ssh-dialer.js';
import { SshRunnerConnector, type SshRunnerConnectorDeps } from './ssh-runner-connector.js';

/** The runner bundle the cell uploads: the self-contained file beside the agent's .mjs entry. */
export function runnerBundleFile(agentEntry: string): string {
  return join(dirname(agentEntry), 'leoflow-agent.cjs');
}

export interface SshRunnerPlaneDeps {
  runners: Pick<RunnerStore, 'listRunners'>;
  /** the tenants whose ssh runners this process keeps connected now (runners/placement.ts) */
  tenants: () => Promise<string[]>;
  /** the runner's credential Connection, decrypted from its tenant's vault for the dial only */
  connection: (tenant_id: string, conn_id: string) => Promise<Connection | undefined>;
  /** the agent entry (cfg.subprocess.agentEntry); its .cjs sibling is what travels */
  agentEntry: string;
  sessions: SshRunnerConnectorDeps['sessions'];
  serve: SshRunnerConnectorDeps['serve'];
  logger: Pick<Logger, 'info' | 'warn'>;
  refreshMs?: number;
}

const PAGE = 500;

/** Every ssh runner of the given tenants, read page by page from the directory. */
async function sshRunnersOf(
  store: Pick<RunnerStore, 'listRunners'>,
  tenants: readonly string[],
): Promise<SshRunner[]> {
  const out: SshRunner[] = [];
  for (const tenant_id of tenants) {
    for (let offset = 0; ; offset += PAGE) {
      const page = await store.listRunners(tenant_id, { limit: PAGE, offset });
      for (const r of page) if (r.kind === 'ssh' && r.ssh !== null) out.push(r);
      if (page.length < PAGE) break;
    }
  }
  return out;
}

/**
 * The control plane's ssh runners: a dialer that uploads the runner bundle and starts it with
 * `--stdio`, and a connector that keeps one session to each ssh runner of the tenants this
 * process serves, serving the runner protocol on it exactly as on a door session. Null when the
 * bundle is not built (nothing could be started on the machines; the warning says how to fix).
 */
export async function startSshRunners(
  deps: SshRunnerPlaneDeps,
): Promise<SshRunnerConnector | null> {
  const file = runnerBundleFile(deps.agentEntry);
  let content: Buffer;
  try {
    content = await readFile(file);
  } catch {
    deps.logger.warn(
      { code: 'LF_SSH_COMMAND_FAILED', bundle: file },
      'ssh runners are not dialed: the runner bundle is missing; run `npm run bundle -w @leoflow/agent`',
    );
    return null;
  }
  const dialer = new SshRunnerDialer({
    connection: deps.connection,
    launch: { kind: 'bundle', content },
    logger: deps.logger,
  });
  const connector = new SshRunnerConnector({
    dialer,
    serve: deps.serve,
    sessions: deps.sessions,
    runners: async () => sshRunnersOf(deps.runners, await deps.tenants()),
    logger: deps.logger,
    ...(deps.refreshMs !== undefined ? { refreshMs: deps.refreshMs } : {}),
  });
  await connector.start();
  return connector;
}
