import { randomBytes } from 'node:crypto';
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, type HandlerContext } from '@connectrpc/connect';
import { createWritableIterable } from '@connectrpc/connect/protocol';
import {
  agentProtocolRefusal,
  AwaitAssignmentResponseSchema,
  checkAgentProtocol,
  ERROR_CODE_METADATA,
  WARM_WORKER_NOT_LEADER_CODE,
  SUPPORTED_AGENT_PROTOCOLS,
  type AwaitAssignmentRequest,
  type AwaitAssignmentResponse,
} from '@leoflow/protocol';
import type { Clock } from '@leoflow/core';
import type { AssignmentBroker } from '../executor/assignments/assignment-broker.js';
import { assignmentMessage } from './assignment-rpc.js';
import type { WorkerTokenClaims, WorkerTokenIssuer } from '../auth/worker-token.js';
import { WORKER_NOT_LEADER, WORKER_NOT_SERVING, workerPrincipal } from './agent-auth.js';
import { WORKER_POOL_ANNOTATION } from '../executor/kubernetes/exchange/reviewed-pod.js';
import type { WarmPoolManager } from '../executor/warm-pools/pool-manager.js';

/** A renewal is pushed once a worker token has this fraction of its TTL left. */
export const WORKER_RENEW_AT_REMAINING = 1 / 3;

export interface WorkerStreamDeps {
  /** the warm pools' own broker: never the runners' one */
  broker: AssignmentBroker;
  manager: Pick<
    WarmPoolManager,
    'servingMember' | 'attemptStarted' | 'attemptFinished' | 'poolConfig' | 'recycle'
  >;
  tokens: Pick<WorkerTokenIssuer, 'mint' | 'ttlSeconds'>;
  clock: Clock;
  keepaliveMs: number;
  /**
   * Does this replica hold the scheduling lease? Only the leader's routing hands out warm
   * assignments (its broker is in its memory), so a stream elsewhere is refused, and a stream
   * whose replica loses the lease is ended, with LF_WARM_WORKER_NOT_LEADER: the worker
   * reconnects on a new connection. Absent: always (one process).
   */
  leading?: () => boolean;
  /** how often the stream looks at the clock for a due renewal (and at the lease) */
  renewCheckMs?: number;
  onError?: (err: unknown) => void;
}

/**
 * AwaitAssignment for a warm-pool worker: it waits in the warm broker, labelled with its pool,
 * for one attempt at a time. Its worker token is renewed on this stream (the worker has no
 * other RPC to renew it with), at a third of its TTL left, as long as its pod still serves;
 * a recycled pod gets no renewal, so its token simply runs out.
 */
export function createWorkerStream(deps: WorkerStreamDeps) {
  const renewCheckMs = deps.renewCheckMs ?? 1_000;
  const onError = deps.onError ?? (() => undefined);
  const leading = deps.leading ?? (() => true);
  /**
   * One stream per pod, the latest: a worker reconnecting after a broken connection replaces
   * its old stream, and a pod never holds two slots (two attempts at once) through two streams.
   */
  const streams = new Map<string, () => void>();
  return async function* awaitAssignment(
    req: AwaitAssignmentRequest,
    ctx: HandlerContext,
  ): AsyncIterable<AwaitAssignmentResponse> {
    const { claims } = workerPrincipal(ctx);
    const { member, serving } = await admitWorker(deps, req, claims, leading);
    const out = createWritableIterable<AwaitAssignmentResponse>();
    const send = (m: AwaitAssignmentResponse) => {
      void out.write(m).catch(() => undefined);
    };
    const identity = {
      pool_key: claims.pool_key,
      tenant_id: claims.tenant_id,
      pod_name: claims.pod_name,
      pod_uid: claims.pod_uid,
    };
    let detached = false;
    const leave = () => {
      if (detached) return;
      detached = true;
      detach();
    };
    const detach = deps.broker.attach({
      id: `wrm_${randomBytes(9).toString('base64url')}`,
      tenant_id: claims.tenant_id,
      labels: { [WORKER_POOL_ANNOTATION]: claims.pool_key },
      // A warm pod runs one attempt at a time: its cleanup between attempts is the isolation.
      slots: Math.max(0, Math.min(1, req.freeSlots)),
      send: (e) => send(assignmentMessage(e)),
      acked: () => {
        deps.manager.attemptStarted(member).catch(onError);
      },
      released: () => {
        // Released because this stream went away (the broker drops what a leaving worker had
        // acked): the attempt runs on, under its own token, so the pod stays busy; its end is
        // the worker's next stream with a free slot (below).
        if (detached) return;
        deps.manager.attemptFinished(member).catch(onError);
      },
      // No other worker may exist for the attempt: this one leaves the pool, and the executor's
      // reconcile sends the attempt to a cold pod rather than back to a worker that did not ack.
      unacked: () => {
        deps.manager.recycle(member, 'unacked').catch(onError);
        leave();
        out.close();
      },
    });
    const replaced = () => {
      leave();
      out.close();
    };
    streams.get(claims.pod_uid)?.();
    streams.set(claims.pod_uid, replaced);
    let leadLost = false;
    const renewal = renewWorkerToken(deps, {
      identity,
      expiresAtMs: claims.exp * 1000,
      serving,
      send,
      leading,
      renewCheckMs,
      onError,
      end: (why) => {
        if (why === 'lead_lost') leadLost = true;
        out.close();
      },
    });
    const keepalive = setInterval(
      () =>
        send(
          create(AwaitAssignmentResponseSchema, {
            event: { case: 'keepalive', value: { serverTimeMs: BigInt(deps.clock.now()) } },
          }),
        ),
      deps.keepaliveMs,
    );
    keepalive.unref();
    const end = () => out.close();
    ctx.signal.addEventListener('abort', end, { once: true });
    // the caller may have gone while the store was read above
    if (ctx.signal.aborted) end();
    try {
      for await (const m of out) yield m;
      if (leadLost) throw notLeader();
    } finally {
      clearInterval(renewal);
      clearInterval(keepalive);
      ctx.signal.removeEventListener('abort', end);
      if (streams.get(claims.pod_uid) === replaced) streams.delete(claims.pod_uid);
      leave();
    }
  };
}

/** Unavailable with the code in the metadata: the worker reconnects, on a new connection. */
function notLeader(): ConnectError {
  return new ConnectError(WORKER_NOT_LEADER, Code.Unavailable, {
    [ERROR_CODE_METADATA]: WARM_WORKER_NOT_LEADER_CODE,
  });
}

/**
 * Admits a worker's AwaitAssignment: its protocol, this replica leading, its pod still a serving
 * member of its tenant's pool (read from the store each time: a pod recycled by any replica is
 * refused at once), and a pod back from a dropped stream with a free slot marked idle.
 */
async function admitWorker(
  deps: WorkerStreamDeps,
  req: AwaitAssignmentRequest,
  claims: WorkerTokenClaims,
  leading: () => boolean,
) {
  const verdict = checkAgentProtocol(req.protocolVersion, SUPPORTED_AGENT_PROTOCOLS);
  if (!verdict.compatible) {
    throw new ConnectError(
      agentProtocolRefusal(verdict, SUPPORTED_AGENT_PROTOCOLS, req.agentVersion),
      Code.FailedPrecondition,
    );
  }
  if (!leading()) throw notLeader();
  const member = { poolKey: claims.pool_key, name: claims.pod_name, uid: claims.pod_uid };
  // Read from the store each time (one read by primary key): a pod recycled by any replica
  // is refused here at once.
  const serving = async () => (await deps.manager.servingMember(member)) !== undefined;
  const pool = deps.manager.poolConfig(claims.pool_key);
  const stored = await deps.manager.servingMember(member);
  if (!stored || !pool || pool.tenant !== claims.tenant_id) {
    throw new ConnectError(WORKER_NOT_SERVING, Code.Unauthenticated);
  }
  // A pod still busy with an attempt whose stream dropped, back with a free slot: the worker
  // says that attempt is over, so the pod is idle from now, or recycled at its attempt limit
  // (stored before the answer: then it is not serving, and takes nothing more).
  if (req.freeSlots >= 1 && stored.busy) {
    await deps.manager.attemptFinished(member);
    if (!(await serving())) throw new ConnectError(WORKER_NOT_SERVING, Code.Unauthenticated);
  }
  return { member, serving };
}

/**
 * The worker token's renewal on its stream: at a third of its TTL left, a fresh token as long as
 * the pod still serves; a recycled pod gets none (its stream ends, its token runs out). A replica
 * that stops leading ends the stream so the worker goes to the leader.
 */
function renewWorkerToken(
  deps: WorkerStreamDeps,
  s: {
    identity: { pool_key: string; tenant_id: string; pod_name: string; pod_uid: string };
    expiresAtMs: number;
    serving: () => Promise<boolean>;
    send: (m: AwaitAssignmentResponse) => void;
    leading: () => boolean;
    renewCheckMs: number;
    onError: (err: unknown) => void;
    end: (why: 'recycled' | 'lead_lost') => void;
  },
): NodeJS.Timeout {
  const ttlMs = deps.tokens.ttlSeconds * 1000;
  let expiresAtMs = s.expiresAtMs;
  let renewing = false;
  const renew = async () => {
    if (!(await s.serving())) {
      s.end('recycled');
      return;
    }
    const renewed = await deps.tokens.mint(s.identity, deps.clock.now());
    expiresAtMs = renewed.expiresAtMs;
    s.send(
      create(AwaitAssignmentResponseSchema, {
        event: {
          case: 'workerToken',
          value: { token: renewed.token, expiresAtMs: BigInt(renewed.expiresAtMs) },
        },
      }),
    );
  };
  const timer = setInterval(() => {
    if (!s.leading()) {
      s.end('lead_lost');
      return;
    }
    if (renewing || deps.clock.now() < expiresAtMs - ttlMs * WORKER_RENEW_AT_REMAINING) return;
    renewing = true;
    renew()
      .catch(s.onError)
      .finally(() => {
        renewing = false;
      });
  }, s.renewCheckMs);
  timer.unref();
  return timer;
}
