import { randomBytes } from 'node:crypto';
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import { createWritableIterable } from '@connectrpc/connect/protocol';
import {
  AckAssignmentResponseSchema,
  agentProtocolRefusal,
  AgentService,
  AwaitAssignmentResponseSchema,
  checkAgentProtocol,
  SUPPORTED_AGENT_PROTOCOLS,
  TaskSpecSchema,
  type AwaitAssignmentRequest,
  type AwaitAssignmentResponse,
} from '@leoflow/protocol';
import { isActive, type Clock } from '@leoflow/core';
import type { RunnerRecord } from '../store/directory-types.js';
import type { TaskInstanceStore } from '../store/ports/task-instances.js';
import { AGENT_PRINCIPAL, attemptPrincipal, runnerPrincipal } from './agent-auth.js';
import type { AssignmentBroker, WorkerEvent } from '../executor/assignments/assignment-broker.js';

/** An idle AwaitAssignment stream gets a Keepalive this often (the door and proxies keep it). */
export const DEFAULT_KEEPALIVE_MS = 15_000;

export interface AssignmentRpcDeps {
  broker: AssignmentBroker;
  /** the runner's current record (its labels and capacity); undefined once it is deleted */
  runnerById: (
    id: string,
  ) => Promise<Pick<RunnerRecord, 'tenant_id' | 'labels' | 'capacity'> | undefined>;
  store: Pick<TaskInstanceStore, 'getAttemptFence'>;
  clock: Clock;
  keepaliveMs?: number;
  /**
   * Lite's host agent (execution.host_agent): the session the control plane opened on its own
   * child's stdio carries this runner id (random per process, never a directory id); its
   * stream waits in the host executor's broker and takes attempts of every tenant.
   */
  host?: { runnerId: string; broker: AssignmentBroker; slots: number };
  /**
   * Warm pools (execution.warm_pools_enabled): a worker principal's stream, and the warm
   * broker an ack may belong to. Absent: a worker token is refused here.
   */
  warm?: {
    broker: AssignmentBroker;
    awaitAssignment: (
      req: AwaitAssignmentRequest,
      ctx: HandlerContext,
    ) => AsyncIterable<AwaitAssignmentResponse>;
  };
}

type AssignmentHandlers = Pick<
  ServiceImpl<typeof AgentService>,
  'awaitAssignment' | 'ackAssignment'
>;

/**
 * AwaitAssignment and AckAssignment. A runner waits in its door session (the runner principal)
 * and is offered attempts up to min(its capacity, the free slots it asks for); each assignment
 * carries the attempt's own token, and the ack is made with that token, so the runner's session
 * never stands in for an attempt.
 */
export function createAssignmentHandlers(deps: AssignmentRpcDeps): AssignmentHandlers {
  const keepaliveMs = deps.keepaliveMs ?? DEFAULT_KEEPALIVE_MS;
  return {
    async *awaitAssignment(req, ctx) {
      if (ctx.values.get(AGENT_PRINCIPAL)?.kind === 'worker') {
        if (!deps.warm) {
          throw new ConnectError(
            'warm pools are not enabled on this control plane (execution.warm_pools_enabled)',
            Code.PermissionDenied,
          );
        }
        yield* deps.warm.awaitAssignment(req, ctx);
        return;
      }
      const principal = runnerPrincipal(ctx);
      const verdict = checkAgentProtocol(req.protocolVersion, SUPPORTED_AGENT_PROTOCOLS);
      if (!verdict.compatible) {
        throw new ConnectError(
          agentProtocolRefusal(verdict, SUPPORTED_AGENT_PROTOCOLS, req.agentVersion),
          Code.FailedPrecondition,
        );
      }
      const host = deps.host?.runnerId === principal.runner_id ? deps.host : undefined;
      const runner = host
        ? { tenant_id: principal.tenant_id, labels: {}, capacity: host.slots }
        : await deps.runnerById(principal.runner_id);
      if (!runner || runner.tenant_id !== principal.tenant_id) {
        throw new ConnectError('this runner was deleted; register it again', Code.Unauthenticated);
      }
      const slots = Math.max(0, Math.min(runner.capacity, req.freeSlots));
      const out = createWritableIterable<AwaitAssignmentResponse>();
      const send = (m: AwaitAssignmentResponse) => {
        void out.write(m).catch(() => undefined);
      };
      const detach = (host?.broker ?? deps.broker).attach({
        id: `wrk_${randomBytes(9).toString('base64url')}`,
        tenant_id: runner.tenant_id,
        ...(host ? { anyTenant: true } : {}),
        labels: runner.labels,
        slots,
        send: (e) => send(assignmentMessage(e)),
      });
      const keepalive = setInterval(
        () =>
          send(
            create(AwaitAssignmentResponseSchema, {
              event: { case: 'keepalive', value: { serverTimeMs: BigInt(deps.clock.now()) } },
            }),
          ),
        keepaliveMs,
      );
      keepalive.unref();
      const end = () => out.close();
      ctx.signal.addEventListener('abort', end, { once: true });
      try {
        for await (const m of out) yield m;
      } finally {
        clearInterval(keepalive);
        ctx.signal.removeEventListener('abort', end);
        detach();
      }
    },

    async ackAssignment(req, ctx) {
      const { claims } = attemptPrincipal(ctx);
      // Assignment ids are random and unique across both brokers: the one holding it answers.
      let broker = deps.broker;
      let outcome = broker.ack(req.assignmentId, claims);
      for (const other of [deps.host?.broker, deps.warm?.broker]) {
        if (outcome.accepted || outcome.reason !== 'unknown' || !other) continue;
        broker = other;
        outcome = broker.ack(req.assignmentId, claims);
      }
      if (!outcome.accepted) {
        return create(AckAssignmentResponseSchema, {
          accepted: false,
          shouldTerminate: true,
          terminateReason:
            outcome.reason === 'expired'
              ? 'the assignment was not acked before its deadline; it went back to the queue'
              : 'no such assignment for this attempt',
        });
      }
      // The attempt may have moved on between hand-over and ack (terminated, superseded).
      const fence = await deps.store.getAttemptFence(claims.task_instance_id);
      if (
        !fence ||
        fence.tenant_id !== claims.tenant_id ||
        fence.try_number !== claims.try_number ||
        fence.dispatch_gen !== claims.dispatch_gen ||
        !isActive(fence.state)
      ) {
        broker.release(claims.task_instance_id, claims.try_number);
        return create(AckAssignmentResponseSchema, {
          accepted: false,
          shouldTerminate: true,
          terminateReason: 'the attempt is no longer the live try of its task instance',
        });
      }
      return create(AckAssignmentResponseSchema, { accepted: true });
    },
  };
}

/** A broker event as the stream's message (runner and warm-pool streams alike). */
export function assignmentMessage(e: WorkerEvent): AwaitAssignmentResponse {
  if (e.kind === 'cancellation') {
    return create(AwaitAssignmentResponseSchema, {
      event: {
        case: 'cancellation',
        value: { assignmentId: e.assignment_id, reason: e.reason },
      },
    });
  }
  // The spec names the attempt only: the agent code fetches the whole spec with GetTaskSpec
  // (with the attempt token), exactly as a subprocess agent does.
  return create(AwaitAssignmentResponseSchema, {
    event: {
      case: 'assignment',
      value: {
        assignmentId: e.assignment_id,
        attemptToken: e.attempt_token,
        ackDeadlineMs: BigInt(e.ack_deadline_ms),
        heartbeatIntervalSeconds: Math.max(1, Math.round(e.heartbeat_interval_ms / 1000)),
        spec: create(TaskSpecSchema, {
          tenantId: e.identity.tenant_id,
          dagId: e.identity.dag_id,
          runId: e.identity.run_id,
          taskId: e.identity.task_id,
          tryNumber: e.identity.try_number,
          taskInstanceId: e.identity.task_instance_id,
        }),
      },
    },
  });
}
