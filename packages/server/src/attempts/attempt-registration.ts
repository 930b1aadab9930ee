import { create } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { RegisterResponseSchema, type RegisterResponse } from '@leoflow/protocol';
import type { Clock, DagSpec } from '@leoflow/core';
import type { Logger } from 'pino';
import type { AgentTokenClaims } from '../auth/agent-token.js';
import {
  CREDENTIAL_COPIED_CODE,
  SESSION_KEY_REQUIRED_CODE,
  type SessionBindings,
} from './session-binding.js';
import type { AttemptCredentialStore } from '../store/ports/attempt-credentials.js';
import type { SecretDelivery } from './secret-delivery.js';
import type { AttemptLifecycle } from './attempt-lifecycle.js';
import type { SpecCache } from '../store/spec-cache.js';
import type { RunStore } from '../store/ports/runs.js';
import type { TaskInstanceStore } from '../store/ports/task-instances.js';
import type { XComStore } from '../store/ports/xcom.js';
import { NO_FAULTS, type FaultInjector } from '../util/test-faults.js';
import { registerPrefetch } from './register-prefetch.js';
import { previousSuccess, taskSpecMessage } from './task-spec-message.js';
import { readUpstreamXCom } from './upstream-xcom.js';

export interface AttemptRegistrationDeps {
  store: TaskInstanceStore &
    RunStore &
    XComStore &
    Pick<AttemptCredentialStore, 'revokeAttemptCredential'>;
  specs: SpecCache;
  clock: Clock;
  lifecycle: AttemptLifecycle;
  logger: Logger;
  heartbeatIntervalMs: number;
  secrets: SecretDelivery;
  /** binds the agent's session key at Register (authoritative) */
  sessions: Pick<SessionBindings, 'bind' | 'refused'>;
  /** drops cached verifications of a revoked attempt's tokens */
  evictAttempt?: (taskInstanceId: string, tryNumber: number) => void;
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
  /** the agent's session key; its SHA-256 is bound to the attempt (required: '' is refused) */
  sessionKey: string;
  /** the agent masks delivered secrets in its output (else the control plane does, on write) */
  masksSecrets?: boolean;
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

  const attemptTask = (claims: AgentTokenClaims, known?: OwnTaskInstance) =>
    attemptTaskOf(deps, claims, known);

  function prefetchFor(claims: AgentTokenClaims, wantSpec: boolean, ti: OwnTaskInstance) {
    // task() runs first; its spec says which upstreams are mapped (their values come as a list)
    let spec: DagSpec | undefined;
    return registerPrefetch(
      {
        variables: () => deps.secrets.variables(claims),
        connections: () => deps.secrets.connections(claims),
        task: async () => {
          // Register already read the task instance: one row read fewer on the hop's path
          const own = await attemptTask(claims, ti);
          const { run, task } = own;
          spec = own.spec;
          return {
            spec: taskSpecMessage(run, own.ti, own.spec, task, await previousSuccess(store, run)),
            dependsOn: task.depends_on,
            dagRunId: own.ti.dag_run_id,
          };
        },
        xcom: (dagRunId, upstream) =>
          spec === undefined
            ? store.getXCom(dagRunId, upstream, 'return_value')
            : readUpstreamXCom(store, spec, dagRunId, upstream, 'return_value'),
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
    if (agent.sessionKey === '') {
      // Before anything is written: a token with no key bound to it would work for anyone.
      throw new ConnectError(
        `${SESSION_KEY_REQUIRED_CODE}: Register needs the agent's session key (RegisterRequest.session_key or the leoflow-session header); upgrade the agent to this control plane's version`,
        Code.FailedPrecondition,
      );
    }
    const ti = await ownTaskInstance(store, claims);
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
    const bound = await deps.sessions.bind(claims, agent.sessionKey, agent.masksSecrets ?? false);
    if (bound === 'conflict') {
      deps.onRegistration?.(via, 'terminate');
      throw await copiedCredential(deps, claims, ti);
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

/** The attempt's task instance, when it belongs to the caller's tenant. */
async function ownTaskInstance(store: AttemptRegistrationDeps['store'], claims: AgentTokenClaims) {
  const ti = await store.getTaskInstanceById(claims.task_instance_id);
  return ti && ti.tenant_id === claims.tenant_id ? ti : undefined;
}

/** The attempt's task instance, run, DAG spec and task; NotFound or FailedPrecondition otherwise. */
async function attemptTaskOf(
  deps: AttemptRegistrationDeps,
  claims: AgentTokenClaims,
  known?: OwnTaskInstance,
) {
  const { store } = deps;
  const ti = known ?? (await ownTaskInstance(store, claims));
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

/**
 * A second agent process registered with this attempt's token: the token was copied (under
 * envvar it is a literal on the pod spec), and which of the two is the real agent cannot be
 * told from here. So neither keeps the attempt: its credential is revoked (no further secret,
 * no renewal), the attempt fails with the reason (retries apply, each with a new token), the
 * use is audited, and this Register is refused with the same sentence. Never silent: the copy
 * that registered first cannot quietly run the attempt.
 */
async function copiedCredential(
  deps: AttemptRegistrationDeps,
  claims: AgentTokenClaims,
  ti: NonNullable<OwnTaskInstance>,
): Promise<ConnectError> {
  const { store, clock, lifecycle, logger } = deps;
  const reason =
    `${CREDENTIAL_COPIED_CODE}: two agent processes registered with the token of try ` +
    `${claims.try_number} of ${claims.task_id}, so it was copied; the attempt is failed and ` +
    'its credential revoked (a retry gets a new one). Find who can read the token (under ' +
    'envvar: get pods in the task namespace) and prefer auth.agent_token_transport=exchange.';
  await deps.sessions.refused(claims, 'register', 'second_registration');
  try {
    await store.revokeAttemptCredential(ti.id, claims.try_number, clock.now());
    deps.evictAttempt?.(ti.id, claims.try_number);
    await lifecycle.fail(ti.id, claims.try_number, {
      reason,
      dispatchGen: claims.dispatch_gen,
    });
  } catch (err) {
    // The refusal stands; the reaper fails an attempt whose agents stop heartbeating.
    logger.error({ err, code: CREDENTIAL_COPIED_CODE }, 'could not fail a copied attempt');
  }
  return new ConnectError(reason, Code.PermissionDenied);
}
