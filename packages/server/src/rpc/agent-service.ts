import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, type ServiceImpl } from '@connectrpc/connect';
import {
  AgentService,
  agentProtocolRefusal,
  checkAgentProtocol,
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
  SUPPORTED_AGENT_PROTOCOLS,
  type AgentProtocolRange,
} from '@leoflow/protocol';
import { ACTIVE_STATES, isActive, type Clock } from '@leoflow/core';
import type { Logger } from 'pino';
import type { AgentTokenClaims, AgentTokenIssuer } from '../auth/agent-token.js';
import type { AttemptRecorder } from '../attempts/attempt-record.js';
import {
  SecretRefusal,
  SecretUnavailable,
  type SecretDelivery,
} from '../attempts/secret-delivery.js';
import type { AttemptLifecycle } from '../attempts/attempt-lifecycle.js';
import type { SpecCache } from '../store/spec-cache.js';
import type { LogStore } from '../store/ports/logs.js';
import type { RunStore } from '../store/ports/runs.js';
import type { TaskInstanceStore } from '../store/ports/task-instances.js';
import type { XComStore } from '../store/ports/xcom.js';
import type { LogLineRow, LogStreamName } from '../store/types.js';
import type { TokenExchange } from '../executor/kubernetes/exchange/token-exchange.js';
import { AGENT_PRINCIPAL, attemptPrincipal } from './agent-auth.js';
import type { AgentChannelMode } from './agent-server.js';
import { taskSpecMessage } from '../attempts/task-spec-message.js';
import {
  createAttemptRegistration,
  type AttemptRegistration,
} from '../attempts/attempt-registration.js';
import { AttemptLogBudgets } from './log-limits.js';
import { DEFAULT_LOG_LIMITS, type LogLimits } from '../config/log-limits.js';
import { NO_FAULTS, type FaultInjector } from '../util/test-faults.js';

export const MAX_XCOM_BYTES = 256 * 1024;
const MAX_LOG_LINES_PER_BATCH = 5_000;
const XCOM_KEY = /^[A-Za-z0-9_.-]{1,200}$/;
/** D5: at most this many names per kind per report are considered. */
const MAX_REPORTED_READS = 500;
const NAME = /^[A-Za-z0-9_.-]{1,250}$/;

export interface AgentServiceDeps {
  store: TaskInstanceStore & RunStore & XComStore & LogStore;
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
  /** counts renewals and ceiling stops (metrics) */
  onRenewal?: (outcome: 'renewed' | 'ceiling_stopped') => void;
  /** PushLogs caps; DEFAULT_LOG_LIMITS when absent */
  logLimits?: LogLimits;
  /** test-only crash points (util/test-faults.ts); none in production */
  faults?: FaultInjector;
  /** The per-try record (session binding at Register, renewals). */
  records?: AttemptRecorder;
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

const STREAMS: Record<number, LogStreamName> = {
  [LogStream.STDOUT]: 'stdout',
  [LogStream.STDERR]: 'stderr',
  [LogStream.AGENT]: 'agent',
};

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
  const { store, clock, tokens, lifecycle, logger } = deps;
  const logLimits = deps.logLimits ?? DEFAULT_LOG_LIMITS;
  const logBudgets = new AttemptLogBudgets(store, logLimits);
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
      ...(deps.records ? { records: deps.records } : {}),
      faults,
    });
  const { attemptTask } = registration;

  async function ownAttemptFence(claims: AgentTokenClaims) {
    const fence = await store.getAttemptFence(claims.task_instance_id);
    return fence && fence.tenant_id === claims.tenant_id ? fence : undefined;
  }

  /** FENCE (writes keyed without the try): only the live try of the task instance. */
  async function fenceLive(claims: AgentTokenClaims) {
    const ti = await ownAttemptFence(claims);
    if (
      !ti ||
      ti.try_number !== claims.try_number ||
      ti.dispatch_gen !== claims.dispatch_gen ||
      !isActive(ti.state)
    ) {
      throw new ConnectError(
        'this attempt is no longer the live try of its task instance; its write was not applied',
        Code.FailedPrecondition,
      );
    }
    return ti;
  }

  /** FENCE (writes keyed with the try): refuses only a try that a later one superseded. */
  async function fenceNotSuperseded(claims: AgentTokenClaims) {
    const ti = await ownAttemptFence(claims);
    if (!ti || ti.try_number !== claims.try_number || ti.dispatch_gen !== claims.dispatch_gen) {
      throw new ConnectError(
        'this attempt was superseded by a later try; its write was not applied',
        Code.FailedPrecondition,
      );
    }
    return ti;
  }

  return {
    async register(req, ctx) {
      const supported = deps.agentProtocols ?? SUPPORTED_AGENT_PROTOCOLS;
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
          serverTimeMs: BigInt(clock.now()),
          heartbeatIntervalSeconds: Math.max(1, Math.round(deps.heartbeatIntervalMs / 1000)),
        });
      }
      const { claims } = attemptPrincipal(ctx);
      // Before anything is written: an agent that would misread the protocol runs nothing.
      const verdict = checkAgentProtocol(req.protocolVersion, supported);
      if (!verdict.compatible) {
        const message = agentProtocolRefusal(verdict, supported, req.agentVersion);
        logger.warn(
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
      return registration.register(
        claims,
        { hostname: req.hostname, pid: req.pid, sessionKey: req.sessionKey },
        { prefetch: req.prefetch, wantSpec: req.wantSpec },
        'rpc',
      );
    },

    async getTaskSpec(_req, ctx) {
      const { claims } = attemptPrincipal(ctx);
      // Free: the spec carries no secret, and a stale attempt learns to stop from Heartbeat.
      const { ti, run, spec, task } = await attemptTask(claims);
      return create(GetTaskSpecResponseSchema, { spec: taskSpecMessage(run, ti, spec, task) });
    },

    async heartbeat(_req, ctx) {
      const { claims, expired } = attemptPrincipal(ctx);
      const now = clock.now();
      // The renewal's exp is known before anything is signed, so the heartbeat's own UPDATE can
      // record it (one statement, see recordHeartbeat); the token is minted only once that write
      // says the attempt is live, not asked to terminate and not revoked. An expired credential
      // (accepted only with the registered session) is never renewed.
      const renewalExp = expired
        ? null
        : tokens.renewalExp(claims, now, deps.maxCredentialLifetimeMs);
      const ceilingStopped = !expired && renewalExp === null;
      let outcome;
      try {
        outcome = await store.recordHeartbeat(
          claims.task_instance_id,
          claims.try_number,
          now,
          claims.dispatch_gen,
          renewalExp === null ? undefined : { credential_exp: renewalExp * 1000 },
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
      // A revoked credential is not renewed; past the ceiling renewal stops quietly; an expired
      // one is never renewed. In all three the task keeps running and its heartbeats and final
      // report keep landing.
      let renewed = '';
      if (outcome.credential_revoked) {
        await deps.records?.renewalStopped(claims, 'revoked');
      } else if (expired) {
        await deps.records?.renewalStopped(claims, 'expired');
      } else if (renewalExp !== null) {
        try {
          const r = await tokens.renew(claims, now, deps.maxCredentialLifetimeMs);
          if ('token' in r) {
            renewed = r.token;
            deps.onRenewal?.('renewed');
          }
        } catch (err) {
          // Rare (a signing failure); the record already counted this renewal.
          logger.warn({ err }, 'credential renewal failed; the agent keeps its current token');
        }
      } else if (ceilingStopped) {
        deps.onRenewal?.('ceiling_stopped');
        await deps.records?.renewalStopped(claims, 'ceiling');
      }
      return create(HeartbeatResponseSchema, { serverTimeMs: BigInt(now), renewedToken: renewed });
    },

    async reportState(req, ctx) {
      // FENCE: every transition below is a compare-and-set on (id, try, queued|running), so a
      // superseded try's report changes nothing and is answered should_terminate.
      const { claims } = attemptPrincipal(ctx);
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
            { states: ACTIVE_STATES, try_number: t, dispatch_gen: gen },
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
      if (applied) {
        await deps.secrets.recordReads(claims, {
          variables: boundedNames(req.variablesRead),
          connections: boundedNames(req.connectionsRead),
        });
      }
      faults.hit('after_report');
      // A report that did not apply came from an attempt that already moved on: acknowledge it
      // (it is not the agent's error) and tell it to stop.
      return create(ReportStateResponseSchema, { acknowledged: true, shouldTerminate: !applied });
    },

    async pushXCom(req, ctx) {
      const { claims } = attemptPrincipal(ctx);
      // FENCE: XCom is keyed without the try, so an old try's (or an old dispatch generation's)
      // push would overwrite the live one; checked here and again in the write's transaction.
      const ti = await fenceLive(claims);
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
      const stored = await store.putXComIfLive(
        {
          tenant_id: ti.tenant_id,
          dag_run_id: ti.dag_run_id,
          task_id: ti.task_id,
          key,
          value: req.value,
          content_type: req.contentType || 'application/json',
          created_at: clock.now(),
        },
        {
          task_instance_id: claims.task_instance_id,
          try_number: claims.try_number,
          dispatch_gen: claims.dispatch_gen,
        },
      );
      if (!stored) {
        // superseded between the fence read above and the write
        throw new ConnectError(
          'this attempt is no longer the live try of its task instance; its write was not applied',
          Code.FailedPrecondition,
        );
      }
      return create(PushXComResponseSchema, { accepted: true });
    },

    async fetchXCom(req, ctx) {
      const { claims } = attemptPrincipal(ctx);
      // Free of the liveness gate; authorised by the dependency below.
      const { ti, task } = await attemptTask(claims);
      if (!task.depends_on.includes(req.upstreamTaskId)) {
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
      const { claims } = attemptPrincipal(ctx);
      // FENCE: a superseded try never lands; the live or just-finished try does.
      const ti = await fenceNotSuperseded(claims);
      if (req.lines.length > MAX_LOG_LINES_PER_BATCH) {
        throw new ConnectError(
          `at most ${MAX_LOG_LINES_PER_BATCH} lines per batch`,
          Code.InvalidArgument,
        );
      }
      const now = clock.now();
      if (
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
      // FENCE again, in the write's transaction: a try superseded since the read above (a retry,
      // a requeue moving it to the next dispatch generation) stores nothing.
      if (
        (keep.length > 0 || note) &&
        !(await store.appendLogsIfNotSuperseded(
          {
            task_instance_id: claims.task_instance_id,
            try_number: claims.try_number,
            dispatch_gen: claims.dispatch_gen,
          },
          keep,
          note,
        ))
      ) {
        throw new ConnectError(
          'this attempt was superseded by a later try; its write was not applied',
          Code.FailedPrecondition,
        );
      }
      const last = rows.reduce((m, r) => Math.max(m, r.line_number), 0);
      return create(PushLogsResponseSchema, { acknowledgedThroughLine: BigInt(last) });
    },

    async getVariables(_req, ctx) {
      const { claims } = attemptPrincipal(ctx);
      const variables = await refusalsAsPermissionDenied(() => deps.secrets.variables(claims));
      return create(GetVariablesResponseSchema, { variables });
    },

    async getConnections(_req, ctx) {
      const { claims } = attemptPrincipal(ctx);
      const connectionUris = await refusalsAsPermissionDenied(() =>
        deps.secrets.connections(claims),
      );
      return create(GetConnectionsResponseSchema, { connectionUris });
    },

    async exchangeToken(req) {
      if (!deps.exchange) {
        throw new ConnectError(
          'the token exchange is not enabled on this control plane (auth.agent_token_transport is not exchange)',
          Code.Unimplemented,
        );
      }
      if (deps.channelMode === 'cleartext-non-loopback') {
        throw new ConnectError(
          'the token exchange is refused over a cleartext non-loopback agent channel; configure agent TLS',
          Code.FailedPrecondition,
        );
      }
      const supported = deps.agentProtocols ?? SUPPORTED_AGENT_PROTOCOLS;
      const verdict = checkAgentProtocol(req.protocolVersion, supported);
      if (!verdict.compatible) {
        throw new ConnectError(
          agentProtocolRefusal(verdict, supported, ''),
          Code.FailedPrecondition,
        );
      }
      return deps.exchange(req);
    },

    awaitAssignment(req, ctx) {
      if (deps.assignments) return deps.assignments.awaitAssignment(req, ctx);
      return noAssignments();
    },

    ackAssignment(req, ctx) {
      if (deps.assignments) return deps.assignments.ackAssignment(req, ctx);
      throw new ConnectError(
        'this control plane has no warm pool or runner to assign attempts to',
        Code.Unimplemented,
      );
    },
  };
}

/** A stream that refuses before its first message. */
function noAssignments(): AsyncIterable<never> {
  return {
    [Symbol.asyncIterator]: () => ({
      next: () =>
        Promise.reject(
          new ConnectError(
            'this control plane has no warm pool or runner to assign attempts to',
            Code.Unimplemented,
          ),
        ),
    }),
  };
}

async function refusalsAsPermissionDenied<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof SecretRefusal) throw new ConnectError(err.message, Code.PermissionDenied);
    if (err instanceof SecretUnavailable) throw new ConnectError(err.message, Code.Unavailable);
    throw err;
  }
}

function boundedNames(names: readonly string[]): string[] {
  return names.slice(0, MAX_REPORTED_READS).filter((n) => NAME.test(n));
}

function truncate(s: string, n: number): string {
  return s.length <= n ? s : `${s.slice(0, n)}…`;
}
