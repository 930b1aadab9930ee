import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  TASK_INSTANCE_STATES,
  TRIGGER_RULES,
  decideSetupConstraint,
  evaluateTriggerRule,
  isTerminal,
  type TaskInstanceState,
  type TriggerRule,
  type UpstreamInstance,
} from '@leoflow/core';

import { CLAUSES, TRIGGER_RULE_TABLE, type Row } from './trigger-rule-table.js';

const S = 'success';
const F = 'failed';
const UF = 'upstream_failed';
const K = 'skipped';
const R = 'running';
const N = 'none';
const RT = 'up_for_retry';

const CODES: Record<string, TaskInstanceState> = {
  S: 'success',
  F: 'failed',
  U: 'upstream_failed',
  K: 'skipped',
  R: 'running',
};

/** "S F* up_for_retry" → upstream instances (`*`: the upstream task is a setup). */
function parseUpstream(text: string): UpstreamInstance[] {
  return text
    .split(' ')
    .filter((t) => t !== '')
    .map((t) => {
      const setup = t.endsWith('*');
      const code = setup ? t.slice(0, -1) : t;
      const state = CODES[code] ?? (code as TaskInstanceState);
      return { state, setup };
    });
}

describe('the trigger-rule table (Airflow 3.3.2, one cited clause per row)', () => {
  it('covers every rule, every one-to-three-upstream combination and every unfinished state', () => {
    expect(TRIGGER_RULE_TABLE).toHaveLength(1023);
    for (const rule of TRIGGER_RULES) {
      const rows = TRIGGER_RULE_TABLE.filter((r) => r[0] === rule && !r[1].includes('*'));
      // the empty upstream, 5 + 15 + 35 multisets of S F U K R, five other unfinished states
      expect(rows, rule).toHaveLength(1 + 55 + 5);
    }
    for (const [, , , clause] of TRIGGER_RULE_TABLE) expect(CLAUSES[clause]).toBeDefined();
  });

  it.each(TRIGGER_RULE_TABLE.map((r): [string, ...Row] => [`${r[0]} [${r[1]}]`, ...r]))(
    '%s',
    (_name, rule, upstream, expected, clause) => {
      expect(evaluateTriggerRule(rule, parseUpstream(upstream)), CLAUSES[clause].source).toBe(
        expected,
      );
    },
  );

  it('rejects an unknown rule with a stable code', () => {
    expect(() => evaluateTriggerRule('some_failed' as TriggerRule, [S])).toThrow(
      expect.objectContaining({ code: 'LF_UNKNOWN_TRIGGER_RULE' }),
    );
  });
});

describe('the setup constraint (Airflow: _evaluate_setup_constraint)', () => {
  it.each([
    [[], 'pass'],
    [[S, S], 'pass'],
    [[S, R], 'wait'],
    [[N], 'wait'],
    [[K, R], 'skip'],
    [[F, K], 'upstream_failed'],
    [[K, UF], 'upstream_failed'],
    [[S, RT], 'wait'],
  ] as const)('indirect setups %j → %s', (states, expected) => {
    expect(decideSetupConstraint(states)).toBe(expected);
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

  it('treats failed and upstream_failed alike, but for one_done (which counts only failed)', () => {
    fc.assert(
      fc.property(ruleArb, fc.array(anyStateArb, { maxLength: 8 }), (rule, ups) => {
        if (rule === 'one_done') return;
        const swapped = ups.map((s) =>
          s === 'failed' ? 'upstream_failed' : s === 'upstream_failed' ? 'failed' : s,
        );
        expect(evaluateTriggerRule(rule, swapped)).toBe(evaluateTriggerRule(rule, ups));
      }),
    );
  });

  it('only the rules that need a success or no failure answer upstream_failed; all_done and always never skip', () => {
    fc.assert(
      fc.property(ruleArb, fc.array(anyStateArb, { maxLength: 8 }), (rule, ups) => {
        const d = evaluateTriggerRule(rule, ups);
        if (d === 'upstream_failed') {
          expect([
            'all_success',
            'one_success',
            'none_failed',
            'none_failed_min_one_success',
            'all_done_min_one_success',
            'all_done_setup_success',
          ]).toContain(rule);
        }
        if (rule === 'all_done') expect(['ready', 'wait']).toContain(d);
        if (rule === 'always') expect(d).toBe('ready');
      }),
    );
  });
});
