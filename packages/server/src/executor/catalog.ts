import type { ExecutorKindName } from '../config/executor-kinds.js';
import type { ServerConfig } from '../config/server-config.js';
import type { ExecutorPosture } from './executor.js';
import { kubernetesPosture, podTokenTransport } from './kubernetes/token-transport.js';
import { HostAgentExecutor } from './host-agent-executor.js';
import { RunnerExecutor } from './runner-executor.js';
import { SubprocessExecutor } from './subprocess-executor.js';

/**
 * An executor this build has, and what it tells the doctor about itself for a configuration.
 * The doctor also runs with no control plane up (`leoflow doctor` on a data dir), so posture is
 * derived from the configuration here rather than read off a running executor; a running
 * executor's own `posture` is the same object's answer.
 */
export interface ExecutorKind {
  readonly name: string;
  posture(cfg: ServerConfig): ExecutorPosture;
}

const subprocess: ExecutorKind = {
  name: 'subprocess',
  // execution.host_agent on: the same kind, served by one host agent (host-agent-executor.ts)
  posture: (cfg) => ({
    tokenTransport: cfg.subprocess.hostAgent
      ? HostAgentExecutor.tokenTransport
      : SubprocessExecutor.tokenTransport,
  }),
};

const kubernetes: ExecutorKind = {
  name: 'kubernetes',
  posture: (cfg) =>
    kubernetesPosture(
      podTokenTransport(cfg.credentials.agentTokenTransport, cfg.credentials.exchangeBootstrap),
    ),
};

const runner: ExecutorKind = {
  name: 'runner',
  posture: () => ({ tokenTransport: RunnerExecutor.tokenTransport }),
};

const BY_NAME: Record<ExecutorKindName, ExecutorKind> = { subprocess, kubernetes, runner };

/** Every executor kind in this build, by name (config/executor-kinds.ts names them). */
export const EXECUTOR_KINDS: ReadonlyMap<string, ExecutorKind> = new Map(Object.entries(BY_NAME));
