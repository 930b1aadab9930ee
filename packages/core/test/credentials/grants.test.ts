import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  grantMatcher,
  grantProblems,
  isGrantedTo,
  notGrantedMessage,
  parseGrants,
} from '../../src/credentials/grants.js';
import { LeoflowError } from '../../src/errors/leoflow-error.js';

describe('secret grants: anchored, case-sensitive globs on the DAG id', () => {
  it.each([
    // [patterns, dag id, granted]
    [null, 'anything', true],
    [[], 'anything', false],
    [['etl_daily'], 'etl_daily', true],
    [['etl_daily'], 'etl_daily_v2', false], // anchored at the end
    [['etl_daily'], 'my_etl_daily', false], // anchored at the start
    [['etl_daily'], 'ETL_DAILY', false], // case-sensitive
    [['etl_*'], 'etl_', true], // * matches nothing too
    [['etl_*'], 'etl_daily.v2-x', true],
    [['etl_*'], 'elt_daily', false],
    [['*_report'], 'weekly_report', true],
    [['report_?'], 'report_1', true],
    [['report_?'], 'report_12', false], // ? is exactly one
    [['report_?'], 'report_', false],
    [['a.b'], 'a.b', true],
    [['a.b'], 'axb', false], // . is literal, not a regex wildcard
    [['team-a*', 'shared'], 'shared', true],
    [['team-a*', 'shared'], 'team-alpha', true],
    [['team-a*', 'shared'], 'team-b', false],
    [['*'], 'x', true],
  ] as const)('%j grants %s: %s', (patterns, dagId, granted) => {
    expect(isGrantedTo(patterns, dagId)).toBe(granted);
  });

  it('a pattern without wildcards grants exactly that DAG id (property)', () => {
    const id = fc.stringMatching(/^[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,30}$/);
    fc.assert(
      fc.property(id, id, (a, b) => {
        expect(isGrantedTo([a], b)).toBe(a === b);
      }),
    );
  });

  it('the matcher of a list is built once and reused', () => {
    expect(grantMatcher(['etl_*', 'x'])).toBe(grantMatcher(['etl_*', 'x']));
  });

  it.each([
    ['not a list', 'grants must be a list of DAG id patterns, or null'],
    [[''], 'pattern 1 is empty'],
    [['ok', 7], 'pattern 2 is not a string'],
    [['etl/*'], 'pattern "etl/*" may use only'],
    [['[abc]'], 'pattern "[abc]" may use only'],
    [['a'.repeat(201)], 'pattern 1 is longer than 200 characters'],
    [Array.from({ length: 101 }, (_, i) => `d${i}`), 'at most 100 patterns'],
  ])('refuses %j: %s', (patterns, problem) => {
    expect(grantProblems(patterns).join('; ')).toContain(problem);
    let thrown: unknown;
    try {
      parseGrants(patterns, 'variable token');
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(LeoflowError);
    expect(thrown).toMatchObject({ code: 'LF_SECRET_GRANT_INVALID' });
    expect((thrown as Error).message).toMatch(/^the grants of variable token are refused: /);
    expect((thrown as Error).message).toContain('null for every DAG');
  });

  it('accepts null, [] and valid patterns, dropping duplicates in order', () => {
    expect(parseGrants(null, 'x')).toBeNull();
    expect(parseGrants([], 'x')).toEqual([]);
    expect(parseGrants(['b*', 'a?', 'b*'], 'x')).toEqual(['b*', 'a?']);
  });

  it('the refusal names the DAG, the secrets and what to do', () => {
    expect(notGrantedMessage('etl', 'connections', ['warehouse', 'lake'])).toBe(
      'dag "etl" declares connection(s) warehouse, lake not granted to it; ask an admin to add a pattern matching "etl" to the grants (leoflow connections set-grants) or remove them from the declaration',
    );
  });
});
