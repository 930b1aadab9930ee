import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  TASK_INSTANCE_STATES,
  TRIGGER_RULES,
  evaluateTriggerRule,
  isTerminal,
  type TaskInstanceState,
  type TriggerDecision,
  type TriggerRule,
} from '@leoflow/core';

type Row = [upstream: TaskInstanceState[], expected: TriggerDecision];

// Shorthands keep the tables readable.
const S = 'success';
const F = 'failed';
const UF = 'upstream_failed';
const K = 'skipped';
const R = 'running';
const Q = 'queued';
const N = 'none';
const RT = 'up_for_retry';
const RS = 'up_for_reschedule';

const TABLES: Record<TriggerRule, Row[]> = {
  all_success: [
    [[S], 'ready'],
    [[S, S, S], 'ready'],
    [[S, R], 'wait'],
    [[N, N], 'wait'],
    [[S, RT], 'wait'],
    [[S, RS], 'wait'],
    [[F], 'upstream_failed'],
    [[UF, S], 'upstream_failed'],
    [[F, R], 'upstream_failed'],
    [[F, K], 'upstream_failed'],
    [[K], 'skip'],
    [[K, S], 'skip'],
    [[K, R], 'skip'],
  ],
  all_failed: [
    [[F], 'ready'],
    [[F, UF], 'ready'],
    [[UF, UF], 'ready'],
    [[F, R], 'wait'],
    [[F, RT], 'wait'],
    [[S], 'skip'],
    [[F, S], 'skip'],
    [[K, F], 'skip'],
    [[S, R], 'skip'],
    [[K, Q], 'skip'],
  ],
  all_done: [
    [[S, F, K, UF], 'ready'],
    [[F], 'ready'],
    [[K, K], 'ready'],
    [[S, R], 'wait'],
    [[F, RT], 'wait'],
    [[S, RS], 'wait'],
    [[N], 'wait'],
  ],
  one_success: [
    [[S], 'ready'],
    [[S, R], 'ready'],
    [[S, F], 'ready'],
    [[R, S, N], 'ready'],
    [[F, R], 'wait'],
    [[K, R], 'wait'],
    [[F, F], 'upstream_failed'],
    [[F, K], 'upstream_failed'],
    [[UF], 'upstream_failed'],
    [[K], 'skip'],
    [[K, K, K], 'skip'],
  ],
  one_failed: [
    [[F], 'ready'],
    [[UF], 'ready'],
    [[F, R], 'ready'],
    [[S, UF, N], 'ready'],
    [[S, R], 'wait'],
    [[RT], 'wait'],
    [[S, S], 'skip'],
    [[S, K], 'skip'],
    [[K], 'skip'],
  ],
};

describe('evaluateTriggerRule tables', () => {
  for (const rule of TRIGGER_RULES) {
    describe(rule, () => {
      it.each(TABLES[rule])('%j → %s', (upstream, expected) => {
        expect(evaluateTriggerRule(rule, upstream)).toBe(expected);
      });
      it('is ready with no upstream at all', () => {
        expect(evaluateTriggerRule(rule, [])).toBe('ready');
      });
    });
  }

  it('rejects an unknown rule with a stable code', () => {
    expect(() => evaluateTriggerRule('none_failed' as TriggerRule, [S])).toThrow(
      expect.objectContaining({ code: 'LF_UNKNOWN_TRIGGER_RULE' }),
    );
  });
});

const NON_TERMINAL = TASK_INSTANCE_STATES.filter((s) => !isTerminal(s));
const TERMINAL = TASK_INSTANCE_STATES.filter((s) => isTerminal(s));

const ruleArb = fc.constantFrom(...TRIGGER_RULES);
const anyStateArb = fc.constantFrom(...TASK_INSTANCE_STATES);

describe('evaluateTriggerRule properties', () => {
  it('is monotonic: as upstreams finish, non-wait never returns to wait and ready stays ready', () => {
    const scenario = fc.integer({ min: 1, max: 6 }).chain((n) =>
      fc.record({
        rule: ruleArb,
        start: fc.array(fc.constantFrom(...NON_TERMINAL), { minLength: n, maxLength: n }),
        finish: fc.array(fc.constantFrom(...TERMINAL), { minLength: n, maxLength: n }),
        order: fc.shuffledSubarray(
          Array.from({ length: n }, (_, i) => i),
          { minLength: n, maxLength: n },
        ),
      }),
    );
    fc.assert(
      fc.property(scenario, ({ rule, start, finish, order }) => {
        const states = [...start];
        let prev = evaluateTriggerRule(rule, states);
        for (const i of order) {
          states[i] = finish[i]!;
          const next = evaluateTriggerRule(rule, states);
          if (prev !== 'wait') expect(next).not.toBe('wait');
          if (prev === 'ready') expect(next).toBe('ready');
          prev = next;
        }
        // Every upstream terminal: the rule must have decided.
        expect(prev).not.toBe('wait');
      }),
      { numRuns: 2000 },
    );
  });

  it('never waits once every upstream is terminal', () => {
    fc.assert(
      fc.property(
        ruleArb,
        fc.array(fc.constantFrom(...TERMINAL), { maxLength: 8 }),
        (rule, ups) => {
          expect(evaluateTriggerRule(rule, ups)).not.toBe('wait');
        },
      ),
    );
  });

  it('ignores the order of upstreams', () => {
    fc.assert(
      fc.property(ruleArb, fc.array(anyStateArb, { maxLength: 8 }), (rule, ups) => {
        expect(evaluateTriggerRule(rule, [...ups].reverse())).toBe(evaluateTriggerRule(rule, ups));
        expect(evaluateTriggerRule(rule, [...ups].sort())).toBe(evaluateTriggerRule(rule, ups));
      }),
    );
  });

  it('treats failed and upstream_failed alike', () => {
    fc.assert(
      fc.property(ruleArb, fc.array(anyStateArb, { maxLength: 8 }), (rule, ups) => {
        const swapped = ups.map((s) =>
          s === 'failed' ? 'upstream_failed' : s === 'upstream_failed' ? 'failed' : s,
        );
        expect(evaluateTriggerRule(rule, swapped)).toBe(evaluateTriggerRule(rule, ups));
      }),
    );
  });

  it('only all_success and one_success ever answer upstream_failed; all_done never skips', () => {
    fc.assert(
      fc.property(ruleArb, fc.array(anyStateArb, { maxLength: 8 }), (rule, ups) => {
        const d = evaluateTriggerRule(rule, ups);
        if (d === 'upstream_failed') expect(['all_success', 'one_success']).toContain(rule);
        if (rule === 'all_done') expect(['ready', 'wait']).toContain(d);
      }),
    );
  });
});
