import { LeoflowError, type SecretLivenessMode } from '@leoflow/core';
import { afterEach, describe, expect, it } from 'vitest';
import { revokeAttemptCredential, type RevocationResult } from '../../src/attempts/revocation.js';
import { createHarness, type Harness } from '../support/harness.js';
import { access, heartbeat, report, setupVaultAndDag, startAttempt } from './support.js';

/**
 * Issue 34, finding 3: revocation works on anything that still verifies. A finished or
 * superseded attempt's token may still verify until its exp (and under observe still resolve
 * secrets); revoking it must stop that and say so — what changed, whether a token still
 * verified and until when — instead of answering "already dead". Two-sided: what revocation
 * leaves alone (the live try beside a revoked superseded one, a live attempt's reports) keeps
 * working. An unknown try is LF_ATTEMPT_NOT_FOUND and writes nothing.
 */
let h: Harness;
afterEach(async () => {
  await h?.close();
});

const TTL_MS = 600_000;

let mode: SecretLivenessMode = 'enforce';

/** Revokes try `tryNumber` (default: the current one) of the task instance `tiId`. */
async function revoke(
  tiId: string,
  tryNumber?: number,
  terminate = false,
): Promise<RevocationResult> {
  const ti = await h.store.getTaskInstanceById(tiId);
  return revokeAttemptCredential(
    {
      store: h.store,
      clock: h.clock,
      executors: h.executors,
      evictAttempt: (id, t) => h.verifier.evictAttempt(id, t),
      livenessMode: mode,
      tokenTtlMs: TTL_MS,
    },
    { taskInstance: ti!, ...(tryNumber !== undefined ? { tryNumber } : {}), terminate },
  );
}

async function setup(liveness: SecretLivenessMode, retries = 0) {
  mode = liveness;
  h = await createHarness({ scoping: 'enforce', liveness });
  await setupVaultAndDag(h, { retries });
}

describe('revoking a live attempt', () => {
  it('without --terminate: secrets refused and renewal stopped at once, the attempt runs on and its outcome lands', async () => {
    await setup('enforce');
    const a = await startAttempt(h);
    expect(await access(h, a.token)).toBe('delivered');
    const r = await revoke(a.identity.task_instance_id);
    expect(r).toMatchObject({
      try_number: 1,
      attempt_state: 'running',
      live: true,
      current: true,
      revoked_now: true,
      tokens_still_valid: true,
      credential_expires_at: new Date(
        Math.floor(h.clock.now() / 1000) * 1000 + TTL_MS,
      ).toISOString(),
      terminated: false,
    });
    expect(r.changes).toEqual([
      expect.stringMatching(/^Its token \(valid until .*\) resolves no secret from now on/),
      'The attempt keeps running: its heartbeats and final report still land past its exp.',
    ]);
    expect(await access(h, a.token)).toBe('denied');
    const beat = await heartbeat(h, a.token, a.session);
    expect([beat?.shouldTerminate, beat?.renewedToken]).toEqual([false, '']);
    expect((await report(h, a.token, 'success', a.session)).shouldTerminate).toBe(false);
    expect(h.executor.terminated).toEqual([]);
  });

  it('with --terminate: the attempt is told to stop and its executor asked to stop it', async () => {
    await setup('enforce');
    const a = await startAttempt(h);
    const r = await revoke(a.identity.task_instance_id, undefined, true);
    expect(r.terminated).toBe(true);
    expect(r.changes[1]).toMatch(/told to stop at its next heartbeat/);
    expect(h.executor.terminated).toEqual([`${a.identity.task_instance_id}#1`]);
    expect((await heartbeat(h, a.token, a.session))?.shouldTerminate).toBe(true);
  });
});

describe('revoking an attempt that moved on', () => {
  it('a finished attempt under observe: its token still resolved secrets; after revocation it resolves none, and the answer says until when it verifies', async () => {
    await setup('observe');
    const a = await startAttempt(h);
    await report(h, a.token, 'success', a.session);
    h.clock.advance(60_000);
    // before: observe still delivers to the ended attempt (the finding)
    expect(await access(h, a.token)).toBe('delivered');
    const r = await revoke(a.identity.task_instance_id, undefined, true);
    const exp = (await h.store.getAttemptRecord(a.identity.task_instance_id, 1))!.credential_exp!;
    expect(exp).toBeGreaterThan(h.clock.now());
    expect(r).toMatchObject({
      attempt_state: 'success',
      live: false,
      current: true,
      revoked_now: true,
      tokens_still_valid: true,
      credential_expires_at: new Date(exp).toISOString(),
      terminated: false,
    });
    expect(r.changes).toEqual([
      `Its token still verified (until ${new Date(exp).toISOString()}); it now resolves no secret in any liveness mode (under secret_liveness_mode=observe it still did) and is never renewed. Its spec and upstream XCom stay readable to its own agent, with its session key, until ${new Date(exp).toISOString()}.`,
      'Nothing to stop: the attempt is success.',
    ]);
    expect(await access(h, a.token)).toBe('denied');
    const audit = await h.store.listAudit(
      'default',
      { action: 'secret.revoked_denied' },
      { limit: 5, offset: 0 },
    );
    expect(audit).toHaveLength(1);
  });

  it('a superseded try under observe: revoking try 1 stops its token and leaves the live try 2 alone', async () => {
    await setup('observe', 1);
    const first = await startAttempt(h);
    await report(h, first.token, 'failed', first.session);
    const second = await startAttempt(h, 'cred', 'existing');
    expect(second.identity.try_number).toBe(2);
    expect(await access(h, first.token)).toBe('delivered'); // observe, before
    const r = await revoke(first.identity.task_instance_id, 1);
    expect(r).toMatchObject({
      try_number: 1,
      attempt_state: 'failed',
      live: false,
      current: false,
      revoked_now: true,
      tokens_still_valid: true,
    });
    expect(await access(h, first.token)).toBe('denied');
    // availability: the live try is untouched
    expect(await access(h, second.token)).toBe('delivered');
    expect((await heartbeat(h, second.token, second.session))?.renewedToken).not.toBe('');
  });

  it('under enforce the answer says the ended attempt already resolved nothing; once its tokens expired it says so', async () => {
    await setup('enforce');
    const a = await startAttempt(h);
    await report(h, a.token, 'success', a.session);
    const r = await revoke(a.identity.task_instance_id);
    expect(r.changes[0]).toContain(
      'under secret_liveness_mode=enforce it already resolved none: the attempt is not live',
    );
    const again = await revoke(a.identity.task_instance_id);
    expect(again.revoked_now).toBe(false);
    expect(again.revoked_at).toBe(r.revoked_at);
    expect(again.changes).toEqual([
      `Nothing changed: its credential was already revoked at ${r.revoked_at}.`,
    ]);
    // another attempt, revoked only after every token of it expired
    await h.runs.trigger('default', 'cred', {});
    const b = await startAttempt(h, 'cred', 'existing');
    await report(h, b.token, 'success', b.session);
    h.clock.advance(TTL_MS + 60_000);
    const late = await revoke(b.identity.task_instance_id);
    expect(late.tokens_still_valid).toBe(false);
    expect(late.changes[0]).toMatch(
      /^Its newest token expired at .*: no token of it verifies any more/,
    );
  });
});

describe('revoking an attempt that does not exist', () => {
  it.each([0, 2, 7])(
    'try %i of a task that ran once: LF_ATTEMPT_NOT_FOUND, nothing written',
    async (t) => {
      await setup('enforce');
      const a = await startAttempt(h);
      const err = await revoke(a.identity.task_instance_id, t).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(LeoflowError);
      expect(err).toMatchObject({ code: 'LF_ATTEMPT_NOT_FOUND' });
      expect((err as Error).message).toMatch(
        new RegExp(
          `^t has no try ${t} \\(its current try is 1\\); name a try it ran \\(leoflow tasks delivery <run> t lists them\\)`,
        ),
      );
      expect(await h.store.getAttemptRecord(a.identity.task_instance_id, t)).toBeUndefined();
      expect(await access(h, a.token)).toBe('delivered');
    },
  );

  it('the current try of a task waiting for its retry was never dispatched: LF_ATTEMPT_NOT_FOUND, and try 1 can still be revoked', async () => {
    await setup('enforce', 1);
    const first = await startAttempt(h);
    await report(h, first.token, 'failed', first.session);
    const id = first.identity.task_instance_id;
    const ti = await h.store.getTaskInstanceById(id);
    expect([ti?.state, ti?.try_number]).toEqual(['up_for_retry', 2]);
    await expect(revoke(id)).rejects.toMatchObject({ code: 'LF_ATTEMPT_NOT_FOUND' });
    expect(await h.store.getAttemptRecord(id, 2)).toBeUndefined();
    expect((await revoke(id, 1)).revoked_now).toBe(true);
  });
});
