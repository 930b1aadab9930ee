import { Code, ConnectError } from '@connectrpc/connect';
import { parseConnectionUri, type SecretScopingMode } from '@leoflow/core';
import { ERROR_CODE_METADATA } from '@leoflow/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { createHarness, type Harness } from '../support/harness.js';
import { setupVaultAndDag, startAttempt, wire } from './support.js';

/**
 * Delivery checks the grants again (issue 34): a grant narrowed after a DAG registered refuses
 * that secret to its attempts with LF_SECRET_NOT_GRANTED (the code in the metadata and in
 * Register's prefetch, so the agent fails the task with the sentence), and a migration mode's
 * whole vault never carries a secret not granted to the DAG. Two-sided: what stays granted is
 * delivered, and widening the grant again delivers.
 */
let h: Harness;
afterEach(async () => {
  await h?.close();
});

const CANARY_V1 = 'canary-granted-v1-5e0f';
const CANARY_OTHER = 'canary-other-dag-only-77aa';

async function setup(scoping: SecretScopingMode) {
  h = await createHarness({ scoping, liveness: 'enforce' });
  await setupVaultAndDag(h); // DAG "cred" declares v1
  const now = h.clock.now();
  await h.vault.setVariable('default', 'v1', CANARY_V1, { secret: true }, now);
  await h.vault.setVariable('default', 'other_only', CANARY_OTHER, { secret: true }, now);
  await h.store.setSecretGrants('default', 'variables', 'other_only', ['another_dag'], now);
  await h.vault.setConnection('default', 'c1', parseConnectionUri('postgres://u:p@db/x'), '', now);
}

function refusal(err: unknown) {
  const e = ConnectError.from(err);
  return { code: e.code, message: e.rawMessage, lf: e.metadata.get(ERROR_CODE_METADATA) };
}

describe('a grant narrowed under a registered DAG', () => {
  it('enforce: the declared secret is refused with LF_SECRET_NOT_GRANTED (code in the metadata); the rest is delivered; widening delivers again', async () => {
    await setup('enforce');
    const a = await startAttempt(h);
    expect((await h.agent(a.token).getVariables({})).variables).toEqual({ v1: CANARY_V1 });

    await h.store.setSecretGrants('default', 'variables', 'v1', ['etl_*'], h.clock.now());
    const r = await h
      .agent(a.token)
      .getVariables({})
      .then(() => undefined, refusal);
    expect(r).toEqual({
      code: Code.PermissionDenied,
      message:
        'LF_SECRET_NOT_GRANTED: dag "cred" declares variable(s) v1 not granted to it; ask an admin to add a pattern matching "cred" to the grants (leoflow variables set-grants) or remove them from the declaration',
      lf: 'LF_SECRET_NOT_GRANTED',
    });
    expect(JSON.stringify(r)).not.toContain(CANARY_V1);
    const rec = await h.store.getAttemptRecord(a.identity.task_instance_id, 1);
    expect(rec?.variables_refusal).toBe('not_granted');

    // a pattern naming it again delivers again
    await h.store.setSecretGrants('default', 'variables', 'v1', ['c?ed', 'x'], h.clock.now());
    expect((await h.agent(a.token).getVariables({})).variables).toEqual({ v1: CANARY_V1 });
  });

  it('Register’s prefetch carries the same refusal and its code; nothing of the value on the wire', async () => {
    await setup('enforce');
    await h.store.setSecretGrants('default', 'variables', 'v1', [], h.clock.now());
    await h.runs.trigger('default', 'cred', {});
    await h.scheduler.tick();
    const [launch] = h.executor.take();
    const reg = await h
      .agent(launch!.token)
      .register({ agentVersion: 't', hostname: 'h', pid: 1, sessionKey: 'k', prefetch: true });
    expect(reg.prefetch?.variables).toBeUndefined();
    expect(reg.prefetch?.variablesRefused).toMatch(/^LF_SECRET_NOT_GRANTED: dag "cred" declares/);
    expect(reg.prefetch?.variablesRefusedCode).toBe('LF_SECRET_NOT_GRANTED');
    expect(reg.prefetch?.connectionsRefusedCode).toBe('');
    expect(wire(reg)).not.toContain(CANARY_V1);
  });

  it('permissive (a migration mode): the whole vault without what is not granted to this DAG', async () => {
    await setup('permissive');
    const a = await startAttempt(h);
    const vars = (await h.agent(a.token).getVariables({})).variables;
    expect(Object.keys(vars).sort()).toEqual(['v1', 'v2']);
    expect(JSON.stringify(vars)).not.toContain(CANARY_OTHER);
    // a declared one narrowed away is refused as under enforce
    await h.store.setSecretGrants('default', 'variables', 'v1', ['nope'], h.clock.now());
    expect(
      (await h
        .agent(a.token)
        .getVariables({})
        .then(() => undefined, refusal))!.lf,
    ).toBe('LF_SECRET_NOT_GRANTED');
  });
});
