import {
  branchFromExitCode,
  branchFromReturnValue,
  shortCircuitDecision,
  type BranchDecision,
  type BranchOutcome,
} from '@leoflow/core';
import type { AgentTokenClaims } from '../auth/agent-token.js';
import type { RunStore } from '../store/ports/runs.js';
import type { XComStore } from '../store/ports/xcom.js';
import type { SpecCache } from '../store/spec-cache.js';

/**
 * What a branch or short-circuit task's report means (issue 41): its decision, recorded with its
 * success, or a coded failure when the decision is unusable (retries apply, as Airflow fails the
 * task). Any other task's report stands as reported.
 */
export type ReportVerdict =
  | { kind: 'as_reported' }
  | { kind: 'succeed'; decision: BranchDecision }
  | { kind: 'fail'; reason: string };

const AS_REPORTED: ReportVerdict = { kind: 'as_reported' };
const utf8 = new TextDecoder('utf-8', { fatal: true });

export class BranchOutcomes {
  constructor(
    private readonly store: Pick<RunStore, 'getRunSpecRef'> & Pick<XComStore, 'getXCom'>,
    private readonly specs: SpecCache,
  ) {}

  /**
   * `reported`: success, or a failure with the task's exit code (not a timeout or a signal). An
   * exit-code branch turns a mapped exit code into a success with that branch; a return-value
   * branch or short-circuit task decides from the return value its success pushed.
   */
  async verdict(
    claims: AgentTokenClaims,
    reported: 'success' | 'failed',
    exitCode: number,
    timedOut: boolean,
  ): Promise<ReportVerdict> {
    const ref = await this.store.getRunSpecRef(claims.dag_run_id);
    if (!ref) return AS_REPORTED;
    const spec = await this.specs.get(ref.tenant_id, ref.dag_id, ref.dag_version);
    const task = spec.tasks.find((t) => t.task_id === claims.task_id);
    if (!task || (task.branch === undefined && task.short_circuit === undefined)) {
      return AS_REPORTED;
    }
    let out: BranchOutcome | undefined;
    if (task.branch?.mode === 'exit_code') {
      if (timedOut) return AS_REPORTED;
      out = branchFromExitCode(spec, task.task_id, exitCode);
      if (out === undefined) return AS_REPORTED;
    } else {
      if (reported !== 'success') return AS_REPORTED;
      const row = await this.store.getXCom(
        claims.dag_run_id,
        claims.task_id,
        'return_value',
        claims.map_index,
      );
      let text: string | undefined;
      try {
        text = row ? utf8.decode(row.value) : undefined;
      } catch {
        text = '';
      }
      out =
        task.short_circuit !== undefined
          ? shortCircuitDecision(spec, task.task_id, text)
          : branchFromReturnValue(spec, task.task_id, text);
    }
    return out.ok
      ? { kind: 'succeed', decision: out.decision }
      : { kind: 'fail', reason: `${out.code}: ${out.message}` };
  }
}
