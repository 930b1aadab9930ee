import type { ServiceImpl } from '@connectrpc/connect';
import type { AgentProtocolRange, AgentService } from '@leoflow/protocol';
import type { Clock } from '@leoflow/core';
import type { Logger } from 'pino';
import type { AgentTokenIssuer } from '../../auth/agent-token.js';
import type { CachingAgentTokenVerifier } from '../../auth/token-cache.js';
import type { AttemptRecorder } from '../../attempts/attempt-record.js';
import type { SessionBindings } from '../../attempts/session-binding.js';
import type { OutputMasking } from '../../attempts/output-masking.js';
import type { SecretDelivery } from '../../attempts/secret-delivery.js';
import type { AttemptLifecycle } from '../../attempts/attempt-lifecycle.js';
import type { AttemptRegistration } from '../../attempts/attempt-registration.js';
import type { SpecCache } from '../../store/spec-cache.js';
import type { LogStore } from '../../store/ports/logs.js';
import type { RunStore } from '../../store/ports/runs.js';
import type { TaskInstanceStore } from '../../store/ports/task-instances.js';
import type { XComStore } from '../../store/ports/xcom.js';
import type { AttemptCredentialStore } from '../../store/ports/attempt-credentials.js';
import type { TokenExchange } from '../../executor/kubernetes/exchange/token-exchange.js';
import type { AgentChannelMode } from '../agent-server.js';
import type { LogLimits } from '../../config/log-limits.js';
import type { FaultInjector } from '../../util/test-faults.js';

/** What the agent service is built from (boot/plane-assembly.ts passes it). */
export interface AgentServiceDeps {
  store: TaskInstanceStore &
    RunStore &
    XComStore &
    LogStore &
    Pick<AttemptCredentialStore, 'revokeAttemptCredential'>;
  specs: SpecCache;
  clock: Clock;
  tokens: AgentTokenIssuer;
  lifecycle: AttemptLifecycle;
  logger: Logger;
  heartbeatIntervalMs: number;
  /** renewal stops (quietly) once this long has passed since the first issue; ≤ 0 disables */
  maxCredentialLifetimeMs: number;
  secrets: SecretDelivery;
  onChange: () => void;
  /**
   * The replica's verified-token cache: a heartbeat's renewed token goes in with the claims it
   * was signed with, so the agent's next call with it costs no signature verification.
   */
  renewedTokens?: Pick<CachingAgentTokenVerifier, 'remember' | 'evictionEpoch'>;
  /** counts renewals and ceiling stops (metrics) */
  onRenewal?: (outcome: 'renewed' | 'ceiling_stopped') => void;
  /** PushLogs caps; DEFAULT_LOG_LIMITS when absent */
  logLimits?: LogLimits;
  /** test-only crash points (util/test-faults.ts); none in production */
  faults?: FaultInjector;
  /** The per-try record (deliveries, renewal stops). */
  records?: AttemptRecorder;
  /** the session bindings Register makes (used when `registration` is absent) */
  sessions: SessionBindings;
  /** masks the output of attempts whose agent does not (an older one); none when absent */
  outputMasking?: OutputMasking;
  /** agent protocol versions Register accepts; SUPPORTED_AGENT_PROTOCOLS when absent */
  agentProtocols?: AgentProtocolRange;
  /** AwaitAssignment and AckAssignment (rpc/assignment-rpc.ts); Unimplemented when absent */
  assignments?: Pick<ServiceImpl<typeof AgentService>, 'awaitAssignment' | 'ackAssignment'>;
  /**
   * The token exchange (executor/kubernetes/exchange/token-exchange.ts), wired only when auth.agent_token_transport
   * is exchange; Unimplemented when absent.
   */
  exchange?: TokenExchange;
  /** what the agent channel protects: the exchange hands out a credential, never in cleartext */
  channelMode?: AgentChannelMode;
  /**
   * Register's work (attempt-registration.ts), shared with the subprocess executor's hand-off;
   * built from these deps when absent.
   */
  registration?: AttemptRegistration;
}
