import { create } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { RegisterResponseSchema, type RegisterResponse } from '@leoflow/protocol';
import type { Clock } from '@leoflow/core';
import type { Logger } from 'pino';
import type { AgentTokenClaims } from '../auth/agent-token.js';
import type { AttemptRecorder } from './attempt-record.js';
import type { SecretDelivery } from './secret-delivery.js';
import type { AttemptLifecycle } from './attempt-lifecycle.js';
import type { SpecCache } from '../store/spec-cache.js';
import type { RunStore } from '../store/ports/runs.js';
import type { TaskInstanceStore } from '../store/ports/task-instances.js';
import type { XComStore } from '../store/ports/xcom.js';
import { NO_FAULTS, type FaultInjector } from '../util/test-faults.js';
import { registerPrefetch } from './register-prefetch.js';
import { taskSpecMessage } from './task-spec-message.js';

export interface AttemptRegistrationDeps {
  store: TaskInstanceStore & RunStore & XComStore;
  specs: SpecCache;
  clock: Clock;
  lifecycle: AttemptLifecycle;
  logger: Logger;
  heartbeatIntervalMs: number;
  secrets: SecretDelivery;
  records?: AttemptRecorder;
  faults?: FaultInjector;
  /** counts each registration by path and outcome (metrics) */
  onRegistration?: (via: RegistrationPath, outcome: 'registered' | 'terminate') => void;
}

/** Who registered an attempt: its agent's Register RPC, or its executor at hand-off. */
export const REGISTRATION_PATHS = ['rpc', 'handoff'] as const;
export type RegistrationPath = (typeof REGISTRATION_PATHS)[number];

/** The agent process an attempt's registration names (Register's request fields). */
export interface RegisteringAgent {
  hostname: string;
  pid: number;
  /** the agent's session key; its SHA-256 is bound to the attempt ('' binds none) */
  sessionKey: string;
}

/** What the registration answers besides its verdict. */
export interface RegistrationWants {
  /** the secrets and upstream XComs in the answer (Register's prefetch) */
  prefetch: boolean;
  /** the spec too (only with prefetch) */
  wantSpec: boolean;
}

export type OwnTaskInstance = Awaited<ReturnType<TaskInstanceStore['getTaskInstanceById']>>;

/**
 * Register's work, once, for both ways an attempt registers: the Register RPC of an agent, and
 * the subprocess executor's hand-off to a standby agent it holds, which registers the attempt on
 * that agent's behalf and puts the answer on the agent's pipe (docs/agent.md, "Standby agents").
 * The order is the contract: the fenced queued → running write, then the per-try record that
 * binds the session key, then — only for an attempt whose write landed — the prefetch, each part
 * under the gate of its own RPC. An attempt whose write does not land gets should_terminate and
 * nothing else, in either liveness mode.
 */
export interface AttemptRegistration {
  register(
    claims: AgentTokenClaims,
    agent: RegisteringAgent,
    wants: RegistrationWants,
    via: RegistrationPath,
  ): Promise<RegisterResponse>;
  /** The attempt's task instance, run, DAG version and task; NotFound/FailedPrecondition otherwise. */
  attemptTask: (
    claims: AgentTokenClaims,
    known?: OwnTaskInstance,
  ) => Promise<{
    ti: NonNullable<OwnTaskInstance>;
    run: NonNullable<Awaited<ReturnType<RunStore['getRunById']>>>;
    spec: Awaited<ReturnType<SpecCache['get']>>;
    task: Awaited<ReturnType<SpecCache['get']>>['tasks'][number];
  }>;
}

export function createAttemptRegistration(deps: AttemptRegistrationDeps): AttemptRegistration {
  const { store, clock, lifecycle, logger } = deps;
  const faults = deps.faults ?? NO_FAULTS;
  const heartbeatIntervalSeconds = Math.max(1, Math.round(deps.heartbeatIntervalMs / 1000));

  /** The attempt's task instance, when it belongs to the caller's tenant. */
  async function ownTaskInstance(claims: AgentTokenClaims) {
    const ti = await store.getTaskInstanceById(claims.task_instance_id);
    return ti && ti.tenant_id === claims.tenant_id ? ti : undefined;
  }

  async function attemptTask(claims: AgentTokenClaims, known?: OwnTaskInstance) {
    const ti = known ?? (await ownTaskInstance(claims));
    const run = ti && (await store.getRunById(ti.dag_run_id));
    if (!ti || !run) {
      throw new ConnectError('the task instance of this attempt was not found', Code.NotFound);
    }
    const spec = await deps.specs.get(run.tenant_id, run.dag_id, run.dag_version);
    const task = spec.tasks.find((t) => t.task_id === ti.task_id);
    if (!task) {
      throw new ConnectError(
        `task ${ti.task_id} is not in version ${run.dag_version} of DAG ${run.dag_id}`,
        Code.FailedPrecondition,
      );
    }
    return { ti, run, spec, task };
  }

  function prefetchFor(claims: AgentTokenClaims, wantSpec: boolean, ti: OwnTaskInstance) {
    return registerPrefetch(
      {
        variables: () => deps.secrets.variables(claims),
        connections: () => deps.secrets.connections(claims),
        task: async () => {
          // Register already read the task instance: one row read fewer on the hop's path
          const own = await attemptTask(claims, ti);
          const { run, spec, task } = own;
          return {
            spec: taskSpecMessage(run, own.ti, spec, task),
            dependsOn: task.depends_on,
            dagRunId: own.ti.dag_run_id,
          };
        },
        xcom: (dagRunId, upstream) => store.getXCom(dagRunId, upstream, 'return_value'),
        onSkipped: (part, err) =>
          logger.warn(
            {
              code: 'LF_REGISTER_PREFETCH_SKIPPED',
              task_instance_id: claims.task_instance_id,
              try_number: claims.try_number,
              part,
              reason: err instanceof Error ? err.constructor.name : typeof err,
            },
            `Register could not prefetch the attempt's ${part}; the agent asks with its own call`,
          ),
      },
      wantSpec,
    );
  }

  async function register(
    claims: AgentTokenClaims,
    agent: RegisteringAgent,
    wants: RegistrationWants,
    via: RegistrationPath,
  ): Promise<RegisterResponse> {
    const ti = await ownTaskInstance(claims);
    // Not gated: the FENCE is the queued -> running write, and an attempt whose write does not
    // land is told to stop (in either liveness mode) instead of being refused.
    const applied =
      ti !== undefined &&
      (await lifecycle.markRunning(
        ti,
        claims.try_number,
        agent.hostname,
        agent.pid,
        claims.dispatch_gen,
      ));
    if (!applied) {
      deps.onRegistration?.(via, 'terminate');
      return create(RegisterResponseSchema, {
        sessionId: claims.task_instance_id,
        serverTimeMs: BigInt(clock.now()),
        heartbeatIntervalSeconds,
        shouldTerminate: true,
        terminateReason: 'the attempt is no longer the live try of its task instance',
      });
    }
    if (deps.records) {
      const bound = await deps.records.register(claims, agent.sessionKey);
      if (bound === 'conflict') {
        throw new ConnectError(
          'another agent process already registered for this attempt',
          Code.PermissionDenied,
        );
      }
    }
    deps.onRegistration?.(via, 'registered');
    // No scheduler poke: queued -> running unblocks nothing the scheduler decides, and a tick
    // here would compete with this agent's next calls on the path to its task's start.
    faults.hit('after_register');
    // After the write and the per-try record, never before: a superseded try got
    // should_terminate above and nothing else.
    const prefetch = wants.prefetch ? await prefetchFor(claims, wants.wantSpec, ti) : undefined;
    return create(RegisterResponseSchema, {
      sessionId: ti.id,
      serverTimeMs: BigInt(clock.now()),
      heartbeatIntervalSeconds,
      ...(prefetch ? { prefetch } : {}),
    });
  }

  return { register, attemptTask };
}
