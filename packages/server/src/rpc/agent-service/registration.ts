import { create } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import {
  agentProtocolRefusal,
  checkAgentProtocol,
  GetTaskSpecResponseSchema,
  RegisterResponseSchema,
  SESSION_HEADER,
  SUPPORTED_AGENT_PROTOCOLS,
} from '@leoflow/protocol';
import { previousSuccess, taskSpecMessage } from '../../attempts/task-spec-message.js';
import { AGENT_PRINCIPAL, attemptPrincipal } from '../agent-auth.js';
import type { AgentHandlers, AgentServiceContext } from './context.js';

/** Register (an attempt or a warm worker), GetTaskSpec and the Kubernetes token exchange. */
export function registrationHandlers(
  c: AgentServiceContext,
): AgentHandlers<'register' | 'getTaskSpec' | 'exchangeToken'> {
  return {
    async register(req, ctx) {
      const supported = c.deps.agentProtocols ?? SUPPORTED_AGENT_PROTOCOLS;
      const caller = ctx.values.get(AGENT_PRINCIPAL);
      if (caller?.kind === 'worker') {
        // A warm-pool pod announcing itself: nothing is written (it runs no attempt yet); its
        // first attempt registers again with that attempt's own token.
        const verdict = checkAgentProtocol(req.protocolVersion, supported);
        if (!verdict.compatible) {
          throw new ConnectError(
            agentProtocolRefusal(verdict, supported, req.agentVersion),
            Code.FailedPrecondition,
          );
        }
        return create(RegisterResponseSchema, {
          sessionId: caller.claims.pod_name,
          serverTimeMs: BigInt(c.clock.now()),
          heartbeatIntervalSeconds: Math.max(1, Math.round(c.deps.heartbeatIntervalMs / 1000)),
        });
      }
      const { claims } = attemptPrincipal(ctx);
      // Before anything is written: an agent that would misread the protocol runs nothing.
      const verdict = checkAgentProtocol(req.protocolVersion, supported);
      if (!verdict.compatible) {
        const message = agentProtocolRefusal(verdict, supported, req.agentVersion);
        c.logger.warn(
          {
            code: 'LF_AGENT_PROTOCOL_INCOMPATIBLE',
            task_instance_id: claims.task_instance_id,
            try_number: claims.try_number,
            agent_protocol: verdict.version,
            supported,
          },
          message,
        );
        throw new ConnectError(message, Code.FailedPrecondition);
      }
      // The key Register binds: its body's, else the header every agent call carries (both are
      // the same key in this build's agent).
      const sessionKey = req.sessionKey || (ctx.requestHeader.get(SESSION_HEADER) ?? '');
      return c.registration.register(
        claims,
        { hostname: req.hostname, pid: req.pid, sessionKey, masksSecrets: req.masksSecrets },
        { prefetch: req.prefetch, wantSpec: req.wantSpec },
        'rpc',
      );
    },
    async getTaskSpec(_req, ctx) {
      const { claims } = attemptPrincipal(ctx);
      // Free: the spec carries no secret, and a stale attempt learns to stop from Heartbeat.
      const { ti, run, spec, task } = await c.registration.attemptTask(claims);
      const prev = await previousSuccess(c.deps.store, run);
      return create(GetTaskSpecResponseSchema, {
        spec: taskSpecMessage(run, ti, spec, task, prev),
      });
    },
    async exchangeToken(req) {
      if (!c.deps.exchange) {
        throw new ConnectError(
          'the token exchange is not enabled on this control plane (auth.agent_token_transport is not exchange)',
          Code.Unimplemented,
        );
      }
      if (c.deps.channelMode === 'cleartext-non-loopback') {
        throw new ConnectError(
          'the token exchange is refused over a cleartext non-loopback agent channel; configure agent TLS',
          Code.FailedPrecondition,
        );
      }
      const supported = c.deps.agentProtocols ?? SUPPORTED_AGENT_PROTOCOLS;
      const verdict = checkAgentProtocol(req.protocolVersion, supported);
      if (!verdict.compatible) {
        throw new ConnectError(
          agentProtocolRefusal(verdict, supported, ''),
          Code.FailedPrecondition,
        );
      }
      return c.deps.exchange(req);
    },
  };
}
