import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import {
  AgentService,
  FetchXComResponseSchema,
  GetConnectionsResponseSchema,
  GetTaskSpecResponseSchema,
  GetVariablesResponseSchema,
  HeartbeatResponseSchema,
  LogStream,
  PushLogsResponseSchema,
  PushXComResponseSchema,
  RegisterResponseSchema,
  ReportedState,
  ReportStateResponseSchema,
  TaskSpecSchema,
  TaskType,
} from '@leoflow/protocol';
import { isActive, type Clock, type TaskType as AuthoredTaskType } from '@leoflow/core';
import type { Logger } from 'pino';
import {
  AgentTokenError,
  type AgentTokenClaims,
  type AgentTokenIssuer,
  type AgentTokenVerification,
} from '../auth/agent-token.js';
import { SecretRefusal, type SecretDelivery } from '../credentials/secret-delivery.js';
import type { AttemptLifecycle } from '../scheduler/attempt-lifecycle.js';
import type { SpecCache } from '../scheduler/spec-cache.js';
import type { Store } from '../store/store.js';
import type { LogLineRow, LogStreamName } from '../store/types.js';
import { AttemptLogBudgets, DEFAULT_LOG_LIMITS, type LogLimits } from './log-limits.js';
import { NO_FAULTS, type FaultInjector } from '../util/test-faults.js';

export const MAX_XCOM_BYTES = 256 * 1024;
const MAX_LOG_LINES_PER_BATCH = 5_000;
const XCOM_KEY = /^[A-Za-z0-9_.-]{1,200}$/;

export interface AgentServiceDeps {
  store: Store;
  specs: SpecCache;
  clock: Clock;
  tokens: AgentTokenIssuer;
  /** verification for the hot path (the caching verifier in production); defaults to tokens */
  verifier?: AgentTokenVerification;
  lifecycle: AttemptLifecycle;
  logger: Logger;
  heartbeatIntervalMs: number;
  /** renewal stops (quietly) once this long has passed since the first issue; ≤ 0 disables */
  maxCredentialLifetimeMs: number;
  secrets: SecretDelivery;
  onChange: () => void;
  /** counts renewals and ceiling stops (metrics) */
  onRenewal?: (outcome: 'renewed' | 'ceiling_stopped') => void;
  /** PushLogs caps; DEFAULT_LOG_LIMITS when absent */
  logLimits?: LogLimits;
  /** test-only crash points (util/test-faults.ts); none in production */
  faults?: FaultInjector;
}

const TASK_TYPES: Record<AuthoredTaskType, TaskType> = {
  bash: TaskType.BASH,
  python: TaskType.PYTHON,
  node: TaskType.NODE,
};

const STREAMS: Record<number, LogStreamName> = {
  [LogStream.STDOUT]: 'stdout',
  [LogStream.STDERR]: 'stderr',
  [LogStream.AGENT]: 'agent',
};

const BEARER = /^Bearer\s+(\S+)$/i;

/**
 * The agent port's gate (see startAgentRpcServer): a caller may send a body only with a bearer
 * this control plane signed. An expired one is still admitted — its signature is genuine, and
 * what an expired token may still do is the service's decision, not the gate's.
 */
export function agentBearerAdmission(
  verifier: AgentTokenVerification,
  clock: Clock,
): (authorization: string | undefined) => Promise<boolean> {
  return async (authorization) => {
    const m = authorization === undefined ? null : BEARER.exec(authorization);
    if (!m?.[1]) return false;
    try {
      await verifier.verify(m[1], clock.now());
      return true;
    } catch (err) {
      return err instanceof AgentTokenError && err.reason === 'expired';
    }
  };
}

/**
 * The agent-facing RPC surface. The caller's identity comes only from its bearer token; no
 * request field names a run, task or try. Heartbeat and ReportState keep answering a stale
 * attempt (so it can be told to stop); everything that reads or writes attempt data requires
 * the attempt to still be the live try.
 */
export function createAgentService(deps: AgentServiceDeps): ServiceImpl<typeof AgentService> {
  const { store, clock, tokens, lifecycle, logger } = deps;
  const verifier = deps.verifier ?? tokens;
  const logLimits = deps.logLimits ?? DEFAULT_LOG_LIMITS;
  const logBudgets = new AttemptLogBudgets(store, logLimits);
  const faults = deps.faults ?? NO_FAULTS;

  async function identify(ctx: HandlerContext): Promise<AgentTokenClaims> {
    const header = ctx.requestHeader.get('authorization');
    if (!header) throw new ConnectError('missing authorization token', Code.Unauthenticated);
    const m = BEARER.exec(header);
    if (!m?.[1]) throw new ConnectError('missing authorization token', Code.Unauthenticated);
    try {
      return await verifier.verify(m[1], clock.now());
    } catch (err) {
      const reason = err instanceof AgentTokenError ? err.reason : 'invalid';
      throw new ConnectError(
        reason === 'expired' ? 'agent token expired' : 'invalid agent token',
        Code.Unauthenticated,
      );
    }
  }

  async function liveAttempt(claims: AgentTokenClaims) {
    const ti = await store.getTaskInstanceById(claims.task_instance_id);
    if (
      !ti ||
      ti.tenant_id !== claims.tenant_id ||
      ti.try_number !== claims.try_number ||
      ti.dispatch_gen !== claims.dispatch_gen ||
      !isActive(ti.state)
    ) {
      throw new ConnectError('task instance is no longer live', Code.FailedPrecondition);
    }
    return ti;
  }

  return {
    async register(req, ctx) {
      const claims = await identify(ctx);
      const ti = await liveAttempt(claims);
      if (
        !(await lifecycle.markRunning(
          ti,
          claims.try_number,
          req.hostname,
          req.pid,
          claims.dispatch_gen,
        ))
      ) {
        throw new ConnectError('task instance is no longer live', Code.FailedPrecondition);
      }
      faults.hit('after_register');
      deps.onChange();
      return create(RegisterResponseSchema, {
        sessionId: ti.id,
        serverTimeMs: BigInt(clock.now()),
        heartbeatIntervalSeconds: Math.max(1, Math.round(deps.heartbeatIntervalMs / 1000)),
      });
    },

    async getTaskSpec(_req, ctx) {
      const claims = await identify(ctx);
      const ti = await liveAttempt(claims);
      const run = await store.getRunById(ti.dag_run_id);
      if (!run) throw new ConnectError('task instance is no longer live', Code.FailedPrecondition);
      const spec = await deps.specs.get(run.tenant_id, run.dag_id, run.dag_version);
      const task = spec.tasks.find((t) => t.task_id === ti.task_id);
      if (!task) {
        throw new ConnectError(
          `task ${ti.task_id} is not in version ${run.dag_version} of DAG ${run.dag_id}`,
          Code.FailedPrecondition,
        );
      }
      const params = { ...spec.params, ...run.conf };
      const env: Record<string, string> = {};
      // Author env keys under LEOFLOW_ are reserved for the platform: dropped at dispatch.
      for (const [k, v] of Object.entries(task.env)) if (!/^leoflow_/i.test(k)) env[k] = v;
      return create(GetTaskSpecResponseSchema, {
        spec: create(TaskSpecSchema, {
          tenantId: run.tenant_id,
          dagId: run.dag_id,
          dagVersion: run.dag_version,
          runId: run.run_id,
          taskId: ti.task_id,
          tryNumber: ti.try_number,
          maxTries: ti.max_tries,
          type: TASK_TYPES[task.type],
          command: task.command,
          env,
          executionTimeoutSeconds: task.execution_timeout_seconds ?? 0,
          doXcomPush: task.do_xcom_push,
          dependsOn: task.depends_on,
          logicalDate: iso(run.logical_date),
          dataIntervalStart: iso(run.data_interval_start),
          dataIntervalEnd: iso(run.data_interval_end),
          paramsJson: JSON.stringify(params),
          confJson: JSON.stringify(run.conf),
          runType: run.run_type,
          taskInstanceId: ti.id,
        }),
      });
    },

    async heartbeat(_req, ctx) {
      const claims = await identify(ctx);
      const now = clock.now();
      let outcome;
      try {
        outcome = await store.recordHeartbeat(
          claims.task_instance_id,
          claims.try_number,
          now,
          claims.dispatch_gen,
        );
      } catch (err) {
        // A datastore blip neither terminates the attempt nor renews its credential.
        logger.warn({ err }, 'heartbeat could not be recorded');
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
      // A revoked credential is not renewed; past the ceiling renewal stops quietly (the task
      // keeps running, its token dies at its current exp).
      let renewed = '';
      if (!outcome.credential_revoked) {
        try {
          const r = await tokens.renew(claims, now, deps.maxCredentialLifetimeMs);
          if ('token' in r) {
            renewed = r.token;
            deps.onRenewal?.('renewed');
          } else {
            deps.onRenewal?.('ceiling_stopped');
          }
        } catch (err) {
          logger.warn({ err }, 'credential renewal failed; the agent keeps its current token');
        }
      }
      return create(HeartbeatResponseSchema, { serverTimeMs: BigInt(now), renewedToken: renewed });
    },

    async reportState(req, ctx) {
      const claims = await identify(ctx);
      const id = claims.task_instance_id;
      const t = claims.try_number;
      const gen = claims.dispatch_gen;
      faults.hit('before_report');
      let applied: boolean;
      switch (req.state) {
        case ReportedState.RUNNING: {
          const ti = await store.getTaskInstanceById(id);
          applied = ti !== undefined && (await lifecycle.markRunning(ti, t, '', 0, gen));
          break;
        }
        case ReportedState.SUCCESS:
          applied = await lifecycle.succeed(id, t, req.exitCode, gen);
          break;
        case ReportedState.FAILED:
          applied = await lifecycle.fail(id, t, {
            exitCode: req.exitCode,
            reason: truncate(req.errorMessage || `task exited with code ${req.exitCode}`, 2000),
            dispatchGen: gen,
          });
          break;
        case ReportedState.SKIPPED: {
          const now = clock.now();
          applied = await store.updateTaskInstance(
            id,
            { states: ['queued', 'running'], try_number: t, dispatch_gen: gen },
            { state: 'skipped', ended_at: now, exit_code: req.exitCode },
            now,
          );
          if (applied) deps.onChange();
          break;
        }
        default:
          throw new ConnectError(
            'state must be RUNNING, SUCCESS, FAILED or SKIPPED',
            Code.InvalidArgument,
          );
      }
      faults.hit('after_report');
      // A report that did not apply came from an attempt that already moved on: acknowledge it
      // (it is not the agent's error) and tell it to stop.
      return create(ReportStateResponseSchema, { acknowledged: true, shouldTerminate: !applied });
    },

    async pushXCom(req, ctx) {
      const claims = await identify(ctx);
      const ti = await liveAttempt(claims);
      faults.hit('after_task_exit');
      if (req.value.byteLength > MAX_XCOM_BYTES) {
        return create(PushXComResponseSchema, {
          accepted: false,
          rejectionReason: 'payload_too_large',
        });
      }
      // The key is required: an empty one is a malformed request, not a default.
      if (req.key === '') {
        throw new ConnectError('PushXCom needs a key (e.g. "return_value")', Code.InvalidArgument);
      }
      const key = req.key;
      if (!XCOM_KEY.test(key)) {
        return create(PushXComResponseSchema, { accepted: false, rejectionReason: 'invalid_key' });
      }
      await store.putXCom({
        tenant_id: ti.tenant_id,
        dag_run_id: ti.dag_run_id,
        task_id: ti.task_id,
        key,
        value: req.value,
        content_type: req.contentType || 'application/json',
        created_at: clock.now(),
      });
      return create(PushXComResponseSchema, { accepted: true });
    },

    async fetchXCom(req, ctx) {
      const claims = await identify(ctx);
      const ti = await liveAttempt(claims);
      const run = await store.getRunById(ti.dag_run_id);
      if (!run) throw new ConnectError('task instance is no longer live', Code.FailedPrecondition);
      const spec = await deps.specs.get(run.tenant_id, run.dag_id, run.dag_version);
      const task = spec.tasks.find((t) => t.task_id === ti.task_id);
      if (!task?.depends_on.includes(req.upstreamTaskId)) {
        throw new ConnectError(
          `task ${ti.task_id} may not read xcom from ${req.upstreamTaskId} (not an upstream it depends on)`,
          Code.PermissionDenied,
        );
      }
      const row = await store.getXCom(ti.dag_run_id, req.upstreamTaskId, req.key || 'return_value');
      if (!row) return create(FetchXComResponseSchema, { found: false });
      return create(FetchXComResponseSchema, {
        found: true,
        value: row.value,
        contentType: row.content_type,
      });
    },

    async pushLogs(req, ctx) {
      const claims = await identify(ctx);
      if (req.lines.length > MAX_LOG_LINES_PER_BATCH) {
        throw new ConnectError(
          `at most ${MAX_LOG_LINES_PER_BATCH} lines per batch`,
          Code.InvalidArgument,
        );
      }
      const now = clock.now();
      const ti = await store.getTaskInstanceById(claims.task_instance_id);
      if (
        ti &&
        ti.try_number === claims.try_number &&
        !isActive(ti.state) &&
        ti.ended_at !== null &&
        now - ti.ended_at > logLimits.writeGraceMs
      ) {
        // Not retryable by the agent: the attempt's log is closed for good.
        throw new ConnectError(
          `log closed: the attempt ended more than ${Math.round(logLimits.writeGraceMs / 1000)}s ago (logs.write_grace)`,
          Code.FailedPrecondition,
        );
      }
      const rows: LogLineRow[] = req.lines.map((l) => ({
        tenant_id: claims.tenant_id,
        dag_run_id: claims.dag_run_id,
        task_id: claims.task_id,
        try_number: claims.try_number,
        line_number: Number(l.lineNumber),
        time: Number(l.timeMs),
        stream: STREAMS[l.stream] ?? 'stdout',
        message: l.message,
      }));
      const { keep, note } = await logBudgets.admit(claims, rows, now);
      if (keep.length > 0) await store.appendLogs(keep);
      if (note) await store.putLogLine(note);
      const last = rows.reduce((m, r) => Math.max(m, r.line_number), 0);
      return create(PushLogsResponseSchema, { acknowledgedThroughLine: BigInt(last) });
    },

    async getVariables(_req, ctx) {
      const claims = await identify(ctx);
      const variables = await refusalsAsPermissionDenied(() => deps.secrets.variables(claims));
      return create(GetVariablesResponseSchema, { variables });
    },

    async getConnections(_req, ctx) {
      const claims = await identify(ctx);
      const connectionUris = await refusalsAsPermissionDenied(() =>
        deps.secrets.connections(claims),
      );
      return create(GetConnectionsResponseSchema, { connectionUris });
    },
  };
}

async function refusalsAsPermissionDenied<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof SecretRefusal) throw new ConnectError(err.message, Code.PermissionDenied);
    throw err;
  }
}

function iso(ms: number | null): string {
  return ms === null ? '' : new Date(ms).toISOString();
}

function truncate(s: string, n: number): string {
  return s.length <= n ? s : `${s.slice(0, n)}…`;
}
