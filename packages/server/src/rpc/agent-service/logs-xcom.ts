import { create } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import {
  FetchXComResponseSchema,
  LogStream,
  PushLogsResponseSchema,
  PushXComResponseSchema,
} from '@leoflow/protocol';
import { isActive } from '@leoflow/core';
import type { LogLineRow, LogStreamName } from '../../store/types.js';
import { attemptPrincipal, type AttemptPrincipal } from '../agent-auth.js';
import type { AgentHandlers, AgentServiceContext } from './context.js';
import {
  readUpstreamXCom,
  ReducedXComTooLarge,
  unmappableReason,
  type UpstreamValue,
} from '../../attempts/upstream-xcom.js';

export const MAX_XCOM_BYTES = 256 * 1024;
const MAX_LOG_LINES_PER_BATCH = 5_000;
const XCOM_KEY = /^[A-Za-z0-9_.-]{1,200}$/;

const STREAMS: Record<number, LogStreamName> = {
  [LogStream.STDOUT]: 'stdout',
  [LogStream.STDERR]: 'stderr',
  [LogStream.AGENT]: 'agent',
};

/** PushLogs, PushXCom and FetchXCom: the attempt's own output, fenced by its try. */
export function logAndXComHandlers(
  c: AgentServiceContext,
): AgentHandlers<'pushXCom' | 'fetchXCom' | 'pushLogs'> {
  return { ...xcomHandlers(c), ...logHandlers(c) };
}

/** PushXCom (fenced by the live try, masked) and FetchXCom (only from an upstream it depends on). */
function xcomHandlers(c: AgentServiceContext): AgentHandlers<'pushXCom' | 'fetchXCom'> {
  return {
    async pushXCom(req, ctx) {
      const principal = attemptPrincipal(ctx);
      const { claims } = principal;
      // FENCE: XCom is keyed without the try, so an old try's (or an old dispatch generation's)
      // push would overwrite the live one; checked here and again in the write's transaction.
      const ti = await c.fences.live(claims);
      c.faults.hit('after_task_exit');
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
      if (key === 'return_value') {
        // A task mapped over this value needs a list of the right length (issue 41): refused
        // here, the pushing task fails with the reason, as Airflow fails it.
        const ref = await c.store.getRunSpecRef(ti.dag_run_id);
        const spec = ref && (await c.deps.specs.get(ref.tenant_id, ref.dag_id, ref.dag_version));
        const why = spec && unmappableReason(spec, ti.task_id, req.value);
        if (why !== undefined) {
          return create(PushXComResponseSchema, { accepted: false, rejectionReason: why });
        }
      }
      const value = await maskedXCom(c, principal, req.value);
      const stored = await c.store.putXComIfLive(
        {
          tenant_id: ti.tenant_id,
          dag_run_id: ti.dag_run_id,
          task_id: ti.task_id,
          map_index: ti.map_index,
          key,
          value,
          content_type: req.contentType || 'application/json',
          created_at: c.clock.now(),
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
      const { ti, task, spec } = await c.registration.attemptTask(claims);
      if (!task.depends_on.includes(req.upstreamTaskId)) {
        throw new ConnectError(
          `task ${ti.task_id} may not read xcom from ${req.upstreamTaskId} (not an upstream it depends on)`,
          Code.PermissionDenied,
        );
      }
      let row: UpstreamValue | undefined;
      try {
        // a mapped upstream's values come as one list (Airflow's reduce)
        row = await readUpstreamXCom(
          c.store,
          spec,
          ti.dag_run_id,
          req.upstreamTaskId,
          req.key || 'return_value',
        );
      } catch (err) {
        if (err instanceof ReducedXComTooLarge) {
          throw new ConnectError(err.message, Code.ResourceExhausted);
        }
        throw err;
      }
      if (!row) return create(FetchXComResponseSchema, { found: false });
      return create(FetchXComResponseSchema, {
        found: true,
        value: row.value,
        contentType: row.content_type,
      });
    },
  };
}

/** PushLogs: the try's lines, masked, within its log budget, refused once its log is closed. */
function logHandlers(c: AgentServiceContext): AgentHandlers<'pushLogs'> {
  return {
    async pushLogs(req, ctx) {
      const principal = attemptPrincipal(ctx);
      const { claims } = principal;
      // FENCE: a superseded try never lands; the live or just-finished try does.
      const ti = await c.fences.notSuperseded(claims);
      if (req.lines.length > MAX_LOG_LINES_PER_BATCH) {
        throw new ConnectError(
          `at most ${MAX_LOG_LINES_PER_BATCH} lines per batch`,
          Code.InvalidArgument,
        );
      }
      const now = c.clock.now();
      if (
        !isActive(ti.state) &&
        ti.ended_at !== null &&
        now - ti.ended_at > c.logLimits.writeGraceMs
      ) {
        // Not retryable by the agent: the attempt's log is closed for good.
        throw new ConnectError(
          `log closed: the attempt ended more than ${Math.round(c.logLimits.writeGraceMs / 1000)}s ago (logs.write_grace)`,
          Code.FailedPrecondition,
        );
      }
      const messages = await maskedLines(
        c,
        principal,
        req.lines.map((l) => l.message),
      );
      const rows: LogLineRow[] = req.lines.map((l, i) => ({
        tenant_id: claims.tenant_id,
        dag_run_id: claims.dag_run_id,
        task_id: claims.task_id,
        map_index: claims.map_index,
        try_number: claims.try_number,
        line_number: Number(l.lineNumber),
        time: Number(l.timeMs),
        stream: STREAMS[l.stream] ?? 'stdout',
        message: messages[i] ?? l.message,
      }));
      const { keep, note } = await c.logBudgets.admit(claims, rows, now);
      // FENCE again, in the write's transaction: a try superseded since the read above (a retry,
      // a requeue moving it to the next dispatch generation) stores nothing.
      if (
        (keep.length > 0 || note) &&
        !(await c.store.appendLogsIfNotSuperseded(
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
  };
}

/**
 * An agent that does not mask delivered secrets in its output (it did not say so at Register: an
 * older one) has its lines masked here, on write (issue 34). This build's agent masks them itself.
 */
async function maskedLines(
  c: AgentServiceContext,
  principal: AttemptPrincipal,
  messages: string[],
): Promise<string[]> {
  if (messages.length === 0 || principal.agentMasksSecrets === true || !c.deps.outputMasking)
    return messages;
  return c.deps.outputMasking.mask(principal.claims, messages);
}

async function maskedXCom(
  c: AgentServiceContext,
  principal: AttemptPrincipal,
  value: Uint8Array,
): Promise<Uint8Array> {
  if (principal.agentMasksSecrets === true || !c.deps.outputMasking) return value;
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(value);
  } catch {
    return value; // not text: nothing a log-style mask could apply to without corrupting it
  }
  const [masked] = await c.deps.outputMasking.mask(principal.claims, [text]);
  return masked === undefined || masked === text ? value : new TextEncoder().encode(masked);
}
