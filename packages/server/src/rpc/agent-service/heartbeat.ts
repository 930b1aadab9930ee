import { create } from '@bufbuild/protobuf';
import { HeartbeatResponseSchema } from '@leoflow/protocol';
import { attemptPrincipal } from '../agent-auth.js';
import type { AgentHandlers, AgentServiceContext } from './context.js';

/** Heartbeat: liveness, should_terminate, and the renewal of the attempt's credential. */
export function heartbeatHandlers(c: AgentServiceContext): AgentHandlers<'heartbeat'> {
  return {
    async heartbeat(_req, ctx) {
      const { claims, expired } = attemptPrincipal(ctx);
      const now = c.clock.now();
      // The renewal's exp is known before anything is signed, so the heartbeat's own UPDATE can
      // record it (one statement, see recordHeartbeat); the token is minted only once that write
      // says the attempt is live, not asked to terminate and not revoked. An expired credential
      // (accepted only with the registered session) is never renewed.
      const renewalExp = expired
        ? null
        : c.tokens.renewalExp(claims, now, c.deps.maxCredentialLifetimeMs);
      const ceilingStopped = !expired && renewalExp === null;
      let outcome;
      try {
        outcome = await c.store.recordHeartbeat(
          claims.task_instance_id,
          claims.try_number,
          now,
          claims.dispatch_gen,
          renewalExp === null ? undefined : { credential_exp: renewalExp * 1000 },
        );
      } catch (err) {
        // A datastore blip neither terminates the attempt nor renews its credential.
        c.logger.warn({ err }, 'heartbeat could not be recorded');
        return create(HeartbeatResponseSchema, { serverTimeMs: BigInt(now) });
      }
      if (outcome.kind === 'stale') {
        return create(HeartbeatResponseSchema, {
          shouldTerminate: true,
          serverTimeMs: BigInt(now),
          terminateReason: 'the attempt is no longer the live try of its task instance',
        });
      }
      if (outcome.terminate_requested) {
        return create(HeartbeatResponseSchema, {
          shouldTerminate: true,
          serverTimeMs: BigInt(now),
          terminateReason: 'termination requested',
        });
      }
      // A revoked credential is not renewed; past the ceiling renewal stops quietly; an expired
      // one is never renewed. In all three the task keeps running and its heartbeats and final
      // report keep landing.
      let renewed = '';
      if (outcome.credential_revoked) {
        await c.deps.records?.renewalStopped(claims, 'revoked');
      } else if (expired) {
        await c.deps.records?.renewalStopped(claims, 'expired');
      } else if (renewalExp !== null) {
        try {
          const epoch = c.deps.renewedTokens?.evictionEpoch ?? 0;
          const r = await c.tokens.renew(claims, now, c.deps.maxCredentialLifetimeMs);
          if ('token' in r) {
            renewed = r.token;
            c.deps.renewedTokens?.remember(r.token, r.claims, now, epoch);
            c.deps.onRenewal?.('renewed');
          }
        } catch (err) {
          // Rare (a signing failure); the record already counted this renewal.
          c.logger.warn({ err }, 'credential renewal failed; the agent keeps its current token');
        }
      } else if (ceilingStopped) {
        c.deps.onRenewal?.('ceiling_stopped');
        await c.deps.records?.renewalStopped(claims, 'ceiling');
      }
      return create(HeartbeatResponseSchema, { serverTimeMs: BigInt(now), renewedToken: renewed });
    },
  };
}
