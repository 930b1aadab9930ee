import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  declaredSet,
  declaredUnion,
  isNarrowerThanVault,
  livenessVerdict,
  planScope,
  resolveConfig,
  validateConfig,
  type DagSpec,
  type SecretLivenessMode,
  type SecretScopingMode,
} from '@leoflow/core';

function spec(dagVars: string[], tasks: Record<string, string[]>): DagSpec {
  return {
    schema_version: '1.0',
    dag_id: 'd',
    description: '',
    owner: '',
    tags: [],
    schedule: null,
    schedule_timezone: 'UTC',
    start_date: null,
    end_date: null,
    catchup: false,
    max_active_runs: 1,
    max_active_tasks: 0,
    defaults: { retries: 0, retry_delay_seconds: 0, execution_timeout_seconds: null },
    params: {},
    variables: dagVars,
    connections: [],
    tasks: Object.entries(tasks).map(([task_id, variables]) => ({
      task_id,
      type: 'bash',
      command: 'true',
      depends_on: [],
      trigger_rule: 'all_success',
      retries: 0,
      retry_delay_seconds: 0,
      execution_timeout_seconds: null,
      env: {},
      variables,
      connections: [],
      do_xcom_push: false,
    })),
  };
}

describe('declared set', () => {
  it("uses the task's own list when it is non-empty", () => {
    expect(declaredSet(spec(['a', 'b'], { t: ['c'] }), 't', 'variables')).toEqual(['c']);
  });
  it("falls back to the DAG's list when the task's is empty (an explicit [] inherits)", () => {
    expect(declaredSet(spec(['a', 'b'], { t: [] }), 't', 'variables')).toEqual(['a', 'b']);
  });
  it('is empty when neither declares anything', () => {
    expect(declaredSet(spec([], { t: [] }), 't', 'variables')).toEqual([]);
  });
  it('the union for registration keeps first-seen order without duplicates', () => {
    expect(declaredUnion(spec(['b', 'a'], { t: ['c', 'a'], u: ['d', 'b'] }), 'variables')).toEqual([
      'b',
      'a',
      'c',
      'd',
    ]);
  });
});

describe('scope plan', () => {
  it('enforce with an empty declaration reads nothing', () => {
    expect(planScope('enforce', [])).toEqual({ read: 'nothing' });
  });
  it('enforce reads exactly the declared names', () => {
    expect(planScope('enforce', ['x', 'y'])).toEqual({ read: 'declared', names: ['x', 'y'] });
  });
  it('permissive reads the whole vault and warns only for a non-empty declaration', () => {
    expect(planScope('permissive', ['x'])).toEqual({ read: 'all', warnWhenNarrower: true });
    expect(planScope('permissive', [])).toEqual({ read: 'all', warnWhenNarrower: false });
  });
  it('off reads the whole vault silently', () => {
    expect(planScope('off', ['x'])).toEqual({ read: 'all', warnWhenNarrower: false });
  });
  it('an unreadable declaration: enforce reads nothing and answers unavailable; permissive/off still deliver', () => {
    expect(planScope('enforce', undefined)).toEqual({ read: 'unavailable' });
    expect(planScope('permissive', undefined)).toEqual({ read: 'all', warnWhenNarrower: false });
    expect(planScope('off', undefined)).toEqual({ read: 'all', warnWhenNarrower: false });
  });
  it('a mode this code does not know falls back to reading nothing (never the whole vault)', () => {
    const unknown = 'permisive' as SecretScopingMode;
    expect(planScope(unknown, ['x'])).toEqual({ read: 'nothing' });
    expect(planScope(unknown, undefined)).toEqual({ read: 'nothing' });
  });
  it('narrower means the vault holds names beyond the declared ones', () => {
    expect(isNarrowerThanVault(['a'], new Set(['a', 'b']))).toBe(true);
    expect(isNarrowerThanVault(['a', 'b'], new Set(['a', 'b']))).toBe(false);
    expect(isNarrowerThanVault(['a', 'b', 'gone'], new Set(['a', 'b']))).toBe(false);
    expect(isNarrowerThanVault([], new Set(['a']))).toBe(false);
  });
});

describe('liveness verdict', () => {
  it('a live attempt is always delivered, in both modes (never a false deny)', () => {
    fc.assert(
      fc.property(fc.constantFrom('observe' as const, 'enforce' as const), (mode) => {
        expect(livenessVerdict(mode, { live: true, revoked: false })).toEqual({ kind: 'deliver' });
      }),
    );
  });
  it('a positively dead attempt is denied under enforce and flagged under observe', () => {
    expect(livenessVerdict('enforce', { live: false, revoked: false })).toEqual({
      kind: 'deny',
      reason: 'not_live',
    });
    expect(livenessVerdict('observe', { live: false, revoked: false })).toEqual({
      kind: 'deliver_would_deny',
    });
  });
  it('liveness-mode fallback: unset is enforce; a mode the gate does not know never denies, but still flags a dead attempt', () => {
    expect(resolveConfig({}).config.secretLivenessMode).toBe('enforce');
    expect(
      resolveConfig({ env: { LEOFLOW_AUTH_SECRET_LIVENESS_MODE: 'enforce' } }).config
        .secretLivenessMode,
    ).toBe('enforce');
    // boot refuses an unknown value naming the key…
    const bad = resolveConfig({ env: { LEOFLOW_AUTH_SECRET_LIVENESS_MODE: 'strict' } }).config;
    expect(validateConfig(bad).map((p) => p.key)).toContain('auth.secret_liveness_mode');
    // …and if one reached the gate anyway it would behave as observe, never as enforce.
    const unknown = 'strict' as SecretLivenessMode;
    expect(livenessVerdict(unknown, { live: true, revoked: false })).toEqual({ kind: 'deliver' });
    expect(livenessVerdict(unknown, { live: false, revoked: false })).toEqual({
      kind: 'deliver_would_deny',
    });
  });
  it('an inconclusive read delivers (transient-error calibration)', () => {
    expect(livenessVerdict('enforce', undefined)).toEqual({ kind: 'deliver' });
  });
  it('a revoked credential is denied in both modes', () => {
    for (const mode of ['observe', 'enforce'] as const) {
      expect(livenessVerdict(mode, { live: true, revoked: true })).toEqual({
        kind: 'deny',
        reason: 'revoked',
      });
    }
  });
});
