import type { ServiceImpl } from '@connectrpc/connect';
import type { AgentService } from '@leoflow/protocol';
import { assignmentHandlers } from './assignments.js';
import { agentServiceContext } from './context.js';
import type { AgentServiceDeps } from './deps.js';
import { heartbeatHandlers } from './heartbeat.js';
import { logAndXComHandlers } from './logs-xcom.js';
import { registrationHandlers } from './registration.js';
import { reportHandlers } from './reports.js';
import { secretHandlers } from './secrets.js';

/**
 * The agent-facing RPC surface. The caller's identity comes only from the principal the
 * authentication interceptor (agent-auth.ts) put on the call context from its bearer token; no
 * request field names a run, task or try. Three different rules apply (docs/credentials.md,
 * "Which RPC checks what"):
 * - the liveness GATE (auth.secret_liveness_mode observe|enforce) wraps GetVariables and
 *   GetConnections only;
 * - the FENCE, mode-independent: PushXCom and ReportState land only for the live try, PushLogs
 *   never for a superseded try, and Register's queued → running write only for the live try;
 * - Register, GetTaskSpec, Heartbeat and FetchXCom are free of both: Heartbeat (and Register
 *   and ReportState) answer should_terminate to an attempt that moved on.
 * Past the token's exp, only the calls that carry no secret and write only the attempt's own
 * data (Heartbeat, ReportState, PushLogs, PushXCom) are still accepted, and only with the
 * session key the agent bound at Register: AGENT_RPC_ACCESS in agent-auth.ts declares it.
 */
export function createAgentService(deps: AgentServiceDeps): ServiceImpl<typeof AgentService> {
  const c = agentServiceContext(deps);
  return {
    ...registrationHandlers(c),
    ...heartbeatHandlers(c),
    ...reportHandlers(c),
    ...logAndXComHandlers(c),
    ...secretHandlers(c),
    ...assignmentHandlers(c),
  };
}
