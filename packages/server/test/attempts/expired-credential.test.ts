import { afterEach, describe, expect, it } from 'vitest';
import { createHarness, FAST_TIMINGS, type Harness } from '../support/harness.js';
import { access, heartbeat, report, setupVaultAndDag, startAttempt } from './support.js';

/**
 * "An expired token is never terminal for the task" (seed 001). On a manual clock: once renewal
 * stops (ceiling, revocation), the task's heartbeats and final report keep landing past exp —
 * but only with the session key its agent bound at Register, so a copied expired token alone
 * reports nothing — and the secret RPCs refuse the expired token.
 */
let h: Harness;
afterEach(async () => {
  await h?.close();
});

const HOUR = 3600_000;
const TTL_MS = 600_000;

async function pastExp(ms: number) {
  h.clock.advance(ms + (h.tokens.clockToleranceSeconds + 1) * 1000);
}

async function tiState(id: string) {
  return (await h.store.getTaskInstanceById(id))?.state;
}

describe('past the ceiling and past exp', () => {
  it('renewal stops at the first beat after the ceiling; past exp the task still beats and its success lands (with its session only)', async () => {
    h = await createHarness({
      scoping: 'enforce',
      liveness: 'enforce',
      ceilingMs: HOUR,
      timings: { ...FAST_TIMINGS, agentLostThresholdMs: 10 * HOUR },
    });
    await setupVaultAndDag(h, { retries: 1 });
    const a = await startAttempt(h);
    const dispatchedAt = h.clock.now();
    let current = a.token;
    let stoppedAt: number | undefined;
    let lastRenewalAt = dispatchedAt;
    for (let i = 0; i < 5 * 60 && stoppedAt === undefined; i++) {
      h.clock.advance(15_000);
      const hb = await heartbeat(h, current, a.session);
      expect(hb?.shouldTerminate).toBe(false);
      if (hb?.renewedToken) {
        current = hb.renewedToken;
        lastRenewalAt = h.clock.now();
      } else stoppedAt = h.clock.now();
    }
    // When it stopped: the first beat strictly after oiat + ceiling, not before.
    expect(stoppedAt).toBeDefined();
    expect(stoppedAt! - dispatchedAt).toBeGreaterThan(HOUR);
    expect(stoppedAt! - dispatchedAt).toBeLessThanOrEqual(HOUR + 15_000);
    const claims = await h.tokens.verify(current, h.clock.now());
    expect(claims.exp * 1000).toBe(Math.floor(lastRenewalAt / 1000) * 1000 + TTL_MS);
    expect(await access(h, current)).toBe('delivered'); // until its exp

    // Past exp: the secret RPCs refuse, with or without the session.
    await pastExp(TTL_MS);
    expect(await access(h, current)).toBe('unauthenticated');
    // A copy of the expired token without the agent's session key: refused.
    expect(await heartbeat(h, current, '')).toBeUndefined();
    expect(await heartbeat(h, current, 'a-guessed-session')).toBeUndefined();
    await expect(report(h, current, 'failed', '')).rejects.toThrow(/LF_CREDENTIAL_UNBOUND/);
    expect(await tiState(a.identity.task_instance_id)).toBe('running');
    // The agent itself (its session): beats land, never renewed, never terminated.
    const hb = await heartbeat(h, current, a.session);
    expect(hb?.shouldTerminate).toBe(false);
    expect(hb?.renewedToken).toBe('');
    h.clock.advance(5 * 60_000);
    await h.scheduler.tick();
    expect(await tiState(a.identity.task_instance_id)).toBe('running');
    const done = await report(h, current, 'success', a.session);
    expect(done.shouldTerminate).toBe(false);
    expect(await tiState(a.identity.task_instance_id)).toBe('success');

    const rec = await h.store.getAttemptRecord(a.identity.task_instance_id, 1);
    expect(rec).toMatchObject({ renewal_stopped: 'ceiling', credential_exp: claims.exp * 1000 });
    expect(rec!.renewals).toBe(Math.round((lastRenewalAt - dispatchedAt) / 15_000));
  });

  it('a secret request past exp is refused even from the live attempt’s own agent with its session key; one second before exp it is delivered', async () => {
    h = await createHarness({
      scoping: 'enforce',
      liveness: 'enforce',
      ceilingMs: 1, // renewal stops at once: the first token is the one that expires
      timings: { ...FAST_TIMINGS, agentLostThresholdMs: 10 * HOUR },
    });
    await setupVaultAndDag(h);
    const a = await startAttempt(h);
    const exp = (await h.tokens.verify(a.token, h.clock.now())).exp * 1000;
    const agent = () => h.agent(a.token, a.session);
    // availability: just before exp, with the agent's key, the live attempt is delivered
    h.clock.set(exp - 1_000);
    expect((await agent().getVariables({})).variables).toEqual({ v1: 'one' });
    expect(Object.keys((await agent().getConnections({})).connectionUris)).toEqual([]);
    // past exp (and the verifier's clock tolerance): refused, though live and session-bound
    await pastExp(1_000);
    expect(await tiState(a.identity.task_instance_id)).toBe('running');
    for (const call of [() => agent().getVariables({}), () => agent().getConnections({})]) {
      const err = await call().then(
        () => undefined,
        (e: unknown) => e as { code: number; rawMessage: string },
      );
      expect(err?.rawMessage).toBe('agent token expired');
    }
    // while the reports its session key opens still land
    expect((await heartbeat(h, a.token, a.session))?.shouldTerminate).toBe(false);
  });

  it('a revoked credential (no --terminate) runs to its end: post-exp beats and the final report land, nothing is renewed or delivered', async () => {
    h = await createHarness({
      scoping: 'enforce',
      liveness: 'observe',
      timings: { ...FAST_TIMINGS, agentLostThresholdMs: 10 * HOUR },
    });
    await setupVaultAndDag(h);
    const a = await startAttempt(h);
    await h.store.revokeAttemptCredential(a.identity.task_instance_id, 1, h.clock.now());
    h.verifier.evictAttempt(a.identity.task_instance_id, 1);
    expect(await access(h, a.token)).toBe('denied');
    await pastExp(TTL_MS);
    const hb = await heartbeat(h, a.token, a.session);
    expect(hb).toMatchObject({ shouldTerminate: false, renewedToken: '' });
    await report(h, a.token, 'success', a.session);
    expect(await tiState(a.identity.task_instance_id)).toBe('success');
    expect((await h.store.getAttemptRecord(a.identity.task_instance_id, 1))?.renewal_stopped).toBe(
      'revoked',
    );
  });

  it('past exp a superseded attempt, even with its session, is told to stop and changes nothing', async () => {
    h = await createHarness({ scoping: 'enforce', liveness: 'enforce' });
    await setupVaultAndDag(h, { retries: 1 });
    const first = await startAttempt(h);
    await report(h, first.token, 'failed', first.session);
    const second = await startAttempt(h, 'cred', 'existing');
    await pastExp(TTL_MS);
    const hb = await heartbeat(h, first.token, first.session);
    expect(hb?.shouldTerminate).toBe(true);
    const res = await report(h, first.token, 'success', first.session);
    expect(res.shouldTerminate).toBe(true);
    expect(await h.store.getTaskInstanceById(second.identity.task_instance_id)).toMatchObject({
      try_number: 2,
      state: 'running',
    });
  });

  it('a token with a bad signature is refused past exp even with the right session', async () => {
    h = await createHarness({ scoping: 'enforce', liveness: 'enforce' });
    await setupVaultAndDag(h);
    const a = await startAttempt(h);
    await pastExp(TTL_MS);
    const [hd, body, sig] = a.token.split('.');
    const forged = `${hd}.${body}.${sig!.slice(0, -2)}${sig!.endsWith('AA') ? 'BB' : 'AA'}`;
    expect(await heartbeat(h, forged, a.session)).toBeUndefined();
    expect(await heartbeat(h, a.token, a.session)).toMatchObject({ shouldTerminate: false });
  });
});
