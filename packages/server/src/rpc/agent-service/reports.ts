import { create } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { ReportedState, ReportStateResponseSchema } from '@leoflow/protocol';
import { ACTIVE_STATES } from '@leoflow/core';
import { attemptPrincipal } from '../agent-auth.js';
import type { AgentHandlers, AgentServiceContext } from './context.js';

/** D5: at most this many names per kind per report are considered. */
const MAX_REPORTED_READS = 500;
const NAME = /^[A-Za-z0-9_.-]{1,250}$/;

/** ReportState: the attempt's transitions, fenced, and the names it read (D5). */
export function reportHandlers(c: AgentServiceContext): AgentHandlers<'reportState'> {
  return {
    async reportState(req, ctx) {
      // FENCE: every transition below is a compare-and-set on (id, try, queued|running), so a
      // superseded try's report changes nothing and is answered should_terminate.
      const { claims } = attemptPrincipal(ctx);
      const id = claims.task_instance_id;
      const t = claims.try_number;
      const gen = claims.dispatch_gen;
      c.faults.hit('before_report');
      let applied: boolean;
      switch (req.state) {
        case ReportedState.RUNNING: {
          const ti = await c.store.getTaskInstanceById(id);
          applied = ti !== undefined && (await c.lifecycle.markRunning(ti, t, '', 0, gen));
          break;
        }
        case ReportedState.SUCCESS:
        case ReportedState.FAILED: {
          // A branch or short-circuit task's report carries its decision (attempts/branch-outcome.ts).
          const success = req.state === ReportedState.SUCCESS;
          const verdict = await c.branches.verdict(
            claims,
            success ? 'success' : 'failed',
            req.exitCode,
            req.timedOut,
          );
          if (verdict.kind === 'succeed') {
            applied = await c.lifecycle.succeed(id, t, req.exitCode, gen, verdict.decision);
          } else if (success && verdict.kind === 'as_reported') {
            applied = await c.lifecycle.succeed(id, t, req.exitCode, gen);
          } else {
            applied = await c.lifecycle.fail(id, t, {
              exitCode: req.exitCode,
              reason: truncate(
                verdict.kind === 'fail'
                  ? verdict.reason
                  : req.errorMessage || `task exited with code ${req.exitCode}`,
                2000,
              ),
              dispatchGen: gen,
            });
          }
          break;
        }
        case ReportedState.SKIPPED: {
          const now = c.clock.now();
          applied = await c.store.updateTaskInstance(
            id,
            { states: ACTIVE_STATES, try_number: t, dispatch_gen: gen },
            { state: 'skipped', ended_at: now, exit_code: req.exitCode },
            now,
          );
          if (applied) c.deps.onChange();
          break;
        }
        default:
          throw new ConnectError(
            'state must be RUNNING, SUCCESS, FAILED or SKIPPED',
            Code.InvalidArgument,
          );
      }
      if (applied) {
        await c.deps.secrets.recordReads(claims, {
          variables: boundedNames(req.variablesRead),
          connections: boundedNames(req.connectionsRead),
        });
      }
      c.faults.hit('after_report');
      // A report that did not apply came from an attempt that already moved on: acknowledge it
      // (it is not the agent's error) and tell it to stop.
      return create(ReportStateResponseSchema, { acknowledged: true, shouldTerminate: !applied });
    },
  };
}

function boundedNames(names: readonly string[]): string[] {
  return names.slice(0, MAX_REPORTED_READS).filter((n) => NAME.test(n));
}

function truncate(s: string, n: number): string {
  return s.length <= n ? s : `${s.slice(0, n)}…`;
}
