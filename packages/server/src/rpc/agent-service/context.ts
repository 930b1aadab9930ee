import type { ServiceImpl } from '@connectrpc/connect';
import type { Clock } from '@leoflow/core';
import type { AgentService } from '@leoflow/protocol';
import type { Logger } from 'pino';
import type { AgentTokenIssuer } from '../../auth/agent-token.js';
import {
  createAttemptRegistration,
  type AttemptRegistration,
} from '../../attempts/attempt-registration.js';
import type { AttemptLifecycle } from '../../attempts/attempt-lifecycle.js';
import { DEFAULT_LOG_LIMITS, type LogLimits } from '../../config/log-limits.js';
import { NO_FAULTS, type FaultInjector } from '../../util/test-faults.js';
import { AttemptLogBudgets } from '../log-limits.js';
import { BranchOutcomes } from '../../attempts/branch-outcome.js';
import type { AgentServiceDeps } from './deps.js';
import { AttemptFences } from './fences.js';

/** Some of the agent service's methods: each handler group (registration.ts, heartbeat.ts, …) implements its own. */
export type AgentHandlers<K extends keyof ServiceImpl<typeof AgentService>> = Pick<
  ServiceImpl<typeof AgentService>,
  K
>;

/** What every handler group of the agent service shares, built once per service. */
export interface AgentServiceContext {
  deps: AgentServiceDeps;
  store: AgentServiceDeps['store'];
  clock: Clock;
  tokens: AgentTokenIssuer;
  lifecycle: AttemptLifecycle;
  logger: Logger;
  faults: FaultInjector;
  /** Register's work, shared with the subprocess executor's hand-off */
  registration: AttemptRegistration;
  logLimits: LogLimits;
  logBudgets: AttemptLogBudgets;
  fences: AttemptFences;
  /** what a branch or short-circuit task's report decides (issue 41) */
  branches: BranchOutcomes;
}

export function agentServiceContext(deps: AgentServiceDeps): AgentServiceContext {
  const { store, clock, tokens, lifecycle, logger } = deps;
  const logLimits = deps.logLimits ?? DEFAULT_LOG_LIMITS;
  const faults = deps.faults ?? NO_FAULTS;
  const registration =
    deps.registration ??
    createAttemptRegistration({
      store,
      specs: deps.specs,
      clock,
      lifecycle,
      logger,
      heartbeatIntervalMs: deps.heartbeatIntervalMs,
      secrets: deps.secrets,
      sessions: deps.sessions,
      faults,
    });
  return {
    deps,
    store,
    clock,
    tokens,
    lifecycle,
    logger,
    faults,
    registration,
    logLimits,
    logBudgets: new AttemptLogBudgets(store, logLimits),
    fences: new AttemptFences(store),
    branches: new BranchOutcomes(store, deps.specs),
  };
}
