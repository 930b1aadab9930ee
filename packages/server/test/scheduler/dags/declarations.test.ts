import { type DagSpec, LeoflowError, type SecretGrants } from '@leoflow/core';
import { describe, expect, it } from 'vitest';
import { checkDeclarations } from '../../../src/scheduler/dags/registration.js';
import type { SecretGrantKind } from '../../../src/store/ports/secret-grants.js';
import { spec, task } from '../../support/spec-builders.js';

/**
 * Registration's declaration check at unit level (issue 34, finding 5): both halves of the
 * unknown-name check (variables, then connections), and the grants, against a fake vault that
 * records what it was asked. Every refusal names the DAG, the names in declared order and the
 * command that fixes it; an empty declaration asks nothing.
 */
type Vault = Record<SecretGrantKind, Record<string, SecretGrants>>;

function fakeStore(vault: Vault) {
  const asked: [SecretGrantKind, string[]][] = [];
  return {
    asked,
    getSecretGrants(tenant: string, kind: SecretGrantKind, names: readonly string[]) {
      expect(tenant).toBe('acme');
      asked.push([kind, [...names]]);
      const known = vault[kind];
      return Promise.resolve(
        new Map(names.filter((n) => n in known).map((n) => [n, known[n] ?? null])),
      );
    },
  };
}

async function refusal(vault: Vault, s: DagSpec): Promise<LeoflowError | null> {
  try {
    await checkDeclarations(fakeStore(vault), 'acme', s);
    return null;
  } catch (e) {
    return e as LeoflowError;
  }
}

const VAULT: Vault = {
  variables: { region: null, api_token: ['etl_*'] },
  connections: { warehouse: null, lake: ['etl_daily', 'report_?'] },
};

describe('registration: unknown declared names', () => {
  it('variables: the unknown ones (DAG ∪ every task, in declared order) are named with the fix', async () => {
    const err = await refusal(
      VAULT,
      spec({
        dag_id: 'etl_daily',
        variables: ['zeta', 'region'],
        tasks: [task('a', { variables: ['alpha', 'zeta'] }), task('b')],
      }),
    );
    expect(err).toBeInstanceOf(LeoflowError);
    expect(err?.code).toBe('LF_DAG_UNKNOWN_DECLARATION');
    expect(err?.message).toBe(
      'dag "etl_daily" declares unknown variable(s) zeta, alpha; define them (leoflow variables set <key> <value>) or remove them from the DAG\'s variables: declaration',
    );
  });

  it('connections: the unknown ones are named with the fix', async () => {
    const err = await refusal(
      VAULT,
      spec({
        dag_id: 'etl_daily',
        tasks: [task('a', { connections: ['warehouse', 'nope_db'] })],
      }),
    );
    expect(err?.code).toBe('LF_DAG_UNKNOWN_DECLARATION');
    expect(err?.message).toBe(
      'dag "etl_daily" declares unknown connection(s) nope_db; define them (leoflow connections set <id> --uri <uri>) or remove them from the DAG\'s connections: declaration',
    );
  });

  it('both kinds unknown: both named, variables first', async () => {
    const err = await refusal(
      VAULT,
      spec({
        dag_id: 'd',
        variables: ['v_missing'],
        connections: ['c_missing'],
        tasks: [task('a')],
      }),
    );
    expect(err?.message).toMatch(
      /^dag "d" declares unknown variable\(s\) v_missing; .*; dag "d" declares unknown connection\(s\) c_missing; /,
    );
  });

  it('known names of both kinds pass; an empty declaration asks the vault nothing', async () => {
    const store = fakeStore(VAULT);
    await checkDeclarations(
      store,
      'acme',
      spec({ dag_id: 'd', variables: ['region'], connections: ['warehouse'], tasks: [task('a')] }),
    );
    expect(store.asked).toEqual([
      ['variables', ['region']],
      ['connections', ['warehouse']],
    ]);
    const empty = fakeStore(VAULT);
    await checkDeclarations(empty, 'acme', spec({ dag_id: 'd', tasks: [task('a')] }));
    expect(empty.asked).toEqual([]);
  });
});

describe('registration: secret grants (issue 34)', () => {
  it.each([
    ['etl_daily', null],
    ['etl_weekly', null],
    ['report_1', 'api_token'],
  ])('dag %s declaring api_token (granted to etl_*): refused → %s', async (dagId, refused) => {
    const err = await refusal(
      VAULT,
      spec({ dag_id: dagId, tasks: [task('a', { variables: ['api_token', 'region'] })] }),
    );
    if (refused === null) expect(err).toBeNull();
    else {
      expect(err?.code).toBe('LF_SECRET_NOT_GRANTED');
      expect(err?.message).toBe(
        `dag "${dagId}" declares variable(s) api_token not granted to it; ask an admin to add a pattern matching "${dagId}" to the grants (leoflow variables set-grants) or remove them from the declaration`,
      );
    }
  });

  it('connections are checked too, and an unknown name is reported before a grant', async () => {
    const ungranted = await refusal(
      VAULT,
      spec({ dag_id: 'report_12', connections: ['lake'], tasks: [task('a')] }),
    );
    expect(ungranted?.code).toBe('LF_SECRET_NOT_GRANTED');
    expect(ungranted?.message).toContain('declares connection(s) lake not granted to it');
    expect(
      await refusal(VAULT, spec({ dag_id: 'report_1', connections: ['lake'], tasks: [task('a')] })),
    ).toBeNull();
    const unknown = await refusal(
      VAULT,
      spec({ dag_id: 'x', variables: ['api_token', 'gone'], tasks: [task('a')] }),
    );
    expect(unknown?.code).toBe('LF_DAG_UNKNOWN_DECLARATION');
  });
});
