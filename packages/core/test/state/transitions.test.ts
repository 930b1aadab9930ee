import { describe, expect, it } from 'vitest';
import {
  DAG_RUN_STATES,
  LeoflowError,
  TASK_INSTANCE_STATES,
  assertRunTransition,
  assertTransition,
  canTransition,
  canTransitionRun,
  legalNextStates,
  type DagRunState,
  type TaskInstanceState,
} from '@leoflow/core';

// Written out by hand, independently of the implementation's table, so a change to either
// shows up as a failing pair. Columns follow the rows' order.
const TASK_COLUMNS: readonly TaskInstanceState[] = [
  'none',
  'scheduled',
  'queued',
  'running',
  'success',
  'failed',
  'skipped',
  'upstream_failed',
  'up_for_retry',
  'up_for_reschedule',
];
// prettier-ignore
const TASK_EXPECTED: Record<TaskInstanceState, string> = {
  //                  non sch que run suc fai ski upf ufr ufs
  none:              '0   1   0   0   0   0   1   1   0   0',
  scheduled:         '1   0   1   0   0   0   1   1   0   0',
  queued:            '0   0   0   1   1   1   1   0   1   1',
  running:           '0   0   0   0   1   1   1   0   1   1',
  success:           '1   0   0   0   0   0   0   0   0   0',
  failed:            '1   0   0   0   0   0   0   0   0   0',
  skipped:           '1   0   0   0   0   0   0   0   0   0',
  upstream_failed:   '1   0   0   0   0   0   0   0   0   0',
  up_for_retry:      '1   1   0   0   0   0   0   0   0   0',
  up_for_reschedule: '1   1   0   0   0   0   0   0   0   0',
};

function expectedTask(from: TaskInstanceState, to: TaskInstanceState): boolean {
  const row = TASK_EXPECTED[from].trim().split(/\s+/);
  return row[TASK_COLUMNS.indexOf(to)] === '1';
}

const TASK_PAIRS = TASK_INSTANCE_STATES.flatMap((from) =>
  TASK_INSTANCE_STATES.map((to) => ({ from, to, legal: expectedTask(from, to) })),
);

describe('task-instance transitions', () => {
  it('covers exactly the ten states in the expected order', () => {
    expect([...TASK_INSTANCE_STATES]).toEqual(TASK_COLUMNS);
    expect(TASK_PAIRS).toHaveLength(100);
    expect(TASK_PAIRS.filter((p) => p.legal)).toHaveLength(26);
  });

  it.each(TASK_PAIRS)('$from → $to is legal: $legal', ({ from, to, legal }) => {
    expect(canTransition(from, to)).toBe(legal);
    if (legal) {
      expect(() => assertTransition(from, to)).not.toThrow();
    } else {
      let thrown: unknown;
      try {
        assertTransition(from, to);
      } catch (e) {
        thrown = e;
      }
      expect(thrown).toBeInstanceOf(LeoflowError);
      expect((thrown as LeoflowError).code).toBe('LF_ILLEGAL_TRANSITION');
      expect((thrown as LeoflowError).message).toContain(`'${from}'`);
      expect((thrown as LeoflowError).details).toMatchObject({ from, to });
    }
  });

  it('legalNextStates agrees with canTransition', () => {
    for (const from of TASK_INSTANCE_STATES) {
      expect([...legalNextStates(from)].sort()).toEqual(
        TASK_INSTANCE_STATES.filter((to) => canTransition(from, to)).sort(),
      );
    }
  });

  it('never allows a self-transition', () => {
    for (const s of TASK_INSTANCE_STATES) expect(canTransition(s, s)).toBe(false);
  });

  it('lets every terminal state and both waiting states be cleared back to none', () => {
    for (const s of [
      'success',
      'failed',
      'skipped',
      'upstream_failed',
      'up_for_retry',
      'up_for_reschedule',
    ] as const) {
      expect(canTransition(s, 'none')).toBe(true);
    }
  });

  it('never clears an active attempt directly', () => {
    expect(canTransition('queued', 'none')).toBe(false);
    expect(canTransition('running', 'none')).toBe(false);
  });

  it('treats an unknown state string as illegal rather than reading the prototype', () => {
    const bogus = 'toString' as TaskInstanceState;
    expect(canTransition(bogus, 'none')).toBe(false);
    expect(canTransition('none', bogus)).toBe(false);
    expect(legalNextStates(bogus)).toEqual([]);
    expect(() => assertTransition(bogus, 'none')).toThrow(LeoflowError);
  });
});

// prettier-ignore
const RUN_EXPECTED: Record<DagRunState, string> = {
  //        que run suc fai
  queued:  '0   1   0   1',
  running: '0   0   1   1',
  success: '1   0   0   0',
  failed:  '1   0   0   0',
};
const RUN_COLUMNS: readonly DagRunState[] = ['queued', 'running', 'success', 'failed'];
const RUN_PAIRS = DAG_RUN_STATES.flatMap((from) =>
  DAG_RUN_STATES.map((to) => ({
    from,
    to,
    legal: RUN_EXPECTED[from].trim().split(/\s+/)[RUN_COLUMNS.indexOf(to)] === '1',
  })),
);

describe('dag-run transitions', () => {
  it('covers the four run states', () => {
    expect([...DAG_RUN_STATES]).toEqual(RUN_COLUMNS);
    expect(RUN_PAIRS.filter((p) => p.legal)).toHaveLength(6);
  });

  it.each(RUN_PAIRS)('run $from → $to is legal: $legal', ({ from, to, legal }) => {
    expect(canTransitionRun(from, to)).toBe(legal);
    if (legal) {
      expect(() => assertRunTransition(from, to)).not.toThrow();
    } else {
      expect(() => assertRunTransition(from, to)).toThrow(
        expect.objectContaining({ code: 'LF_ILLEGAL_TRANSITION' }),
      );
    }
  });

  it('treats an unknown run state as illegal', () => {
    expect(canTransitionRun('constructor' as DagRunState, 'queued')).toBe(false);
  });
});
