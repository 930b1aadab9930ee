import { agentTokenTtlSeconds, validateTimingLadder } from '@leoflow/core';
import { afterEach, describe, expect, it } from 'vitest';
import { createHarness, type Harness, type HarnessOptions } from '../support/harness.js';
import { access, heartbeat, report, setupVaultAndDag, startAttempt } from './support.js';

/**
 * The state-machine matrix of the per-attempt credential, over a manual clock. Every case
 * asserts both sides: the live attempt's token always resolves and renews (never a false
 * deny), and a terminal, superseded, revoked or expired one never resolves under enforce.
 */
let h: Harness;
async function harness(opts: HarnessOptions = {}) {
  h = await createHarness({ scoping: 'enforce', liveness: 'enforce', ...opts });
  await setupVaultAndDag(h, { retries: 1 });
  return h;
}
afterEach(async () => {
  await h?.close();
});

async function runOf(h: Harness) {
  const runs = await h.store.listRuns('default', { dag_id: 'cred' }, { limit: 10, offset: 0 });
  return runs[0]!;
}

describe('credential liveness matrix (enforce)', () => {
  it('running → success: live resolves and renews; after success it resolves nothing and gets no renewal', async () => {
    await harness();
    const a = await startAttempt(h);
    expect(await access(h, a.token)).toBe('delivered');
    const hb = await heartbeat(h, a.token);
    expect(hb?.renewedToken).not.toBe('');
    await report(h, a.token, 'success');
    expect(await access(h, a.token)).toBe('denied');
    expect(await access(h, hb!.renewedToken)).toBe('denied');
    const late = await heartbeat(h, a.token);
    expect(late?.shouldTerminate).toBe(true);
    expect(late?.renewedToken).toBe('');
  });

  it('running → failed (no retries left): the token dies with the attempt', async () => {
    h = await createHarness({ scoping: 'enforce', liveness: 'enforce' });
    await setupVaultAndDag(h, { retries: 0 });
    const a = await startAttempt(h);
    expect(await access(h, a.token)).toBe('delivered');
    await report(h, a.token, 'failed');
    expect(await access(h, a.token)).toBe('denied');
  });

  it('running → superseded by a retry: the old token dies, the new attempt gets a new lineage that resolves', async () => {
    await harness();
    const first = await startAttempt(h);
    await report(h, first.token, 'failed');
    // Time passes before the retry is dispatched: its lineage must start then, not inherit oiat.
    h.clock.advance(7 * 60_000);
    const second = await startAttempt(h, 'cred', 'existing');
    const secondDispatchedAt = h.clock.now();
    expect(second.identity.try_number).toBe(2);
    expect(await access(h, first.token)).toBe('denied');
    expect(await access(h, second.token)).toBe('delivered');
    const c1 = await h.tokens.verify(first.token, h.clock.now() - 7 * 60_000);
    const c2 = await h.tokens.verify(second.token, h.clock.now());
    expect(c2.oiat).toBe(Math.floor(secondDispatchedAt / 1000));
    expect(c2.oiat - c1.oiat).toBe(7 * 60);
  });

  it('a year-old run cleared and rerun: the new attempt resolves (no recency term), the old token stays dead', async () => {
    await harness();
    const a = await startAttempt(h);
    await report(h, a.token, 'success');
    await h.scheduler.tick();
    h.clock.advance(365 * 24 * 3600_000);
    const run = await runOf(h);
    await h.runs.clear('default', 'cred', run.run_id, { taskIds: null, downstream: true });
    const b = await startAttempt(h, 'cred', run.run_id);
    expect(await access(h, b.token)).toBe('delivered');
    // a fresh lineage dated from the new dispatch, never from the run's age
    expect((await h.tokens.verify(b.token, h.clock.now())).oiat).toBe(
      Math.floor(h.clock.now() / 1000),
    );
    expect((await heartbeat(h, b.token))?.renewedToken).not.toBe('');
    expect(await access(h, a.token)).toBe('unauthenticated'); // and long expired
  });

  it('reschedule defer → return: not live while deferred, live again on return with the same try', async () => {
    await harness();
    const a = await startAttempt(h);
    const ti = a.identity.task_instance_id;
    const now = h.clock.now();
    await h.store.updateTaskInstance(
      ti,
      { states: ['running'], try_number: 1 },
      { state: 'up_for_reschedule' },
      now,
    );
    expect(await access(h, a.token)).toBe('denied');
    await h.store.updateTaskInstance(
      ti,
      { states: ['up_for_reschedule'], try_number: 1 },
      { state: 'running' },
      now,
    );
    expect(await access(h, a.token)).toBe('delivered');
  });

  it('revocation stops resolving and renewing at once; the attempt keeps running', async () => {
    await harness({ liveness: 'observe' });
    const a = await startAttempt(h);
    expect(await access(h, a.token)).toBe('delivered');
    await h.store.revokeAttemptCredential(a.identity.task_instance_id, 1, h.clock.now());
    h.verifier.evictAttempt(a.identity.task_instance_id, 1);
    expect(await access(h, a.token)).toBe('denied');
    const hb = await heartbeat(h, a.token);
    expect(hb?.shouldTerminate).toBe(false);
    expect(hb?.renewedToken).toBe('');
    // A retry is a new attempt with a credential of its own.
    await report(h, a.token, 'failed');
    const b = await startAttempt(h, 'cred', 'existing');
    expect(await access(h, b.token)).toBe('delivered');
  });

  it('an unrenewed token expires after its TTL; heartbeats keep a live attempt resolving for hours', async () => {
    await harness({
      timings: {
        ...(await import('../support/harness.js')).FAST_TIMINGS,
        agentLostThresholdMs: 10 * 3600_000,
      },
    });
    const a = await startAttempt(h);
    let current = a.token;
    for (let i = 0; i < 8 * 60; i++) {
      h.clock.advance(15_000);
      const hb = await heartbeat(h, current);
      expect(hb?.shouldTerminate).toBe(false);
      expect(hb?.renewedToken).not.toBe('');
      current = hb!.renewedToken;
      if (i % 40 === 0) expect(await access(h, current)).toBe('delivered');
    }
    expect(await access(h, current)).toBe('delivered');
    expect(await access(h, a.token)).toBe('unauthenticated');
    // exp = last renewal + TTL; past it (and the verifier's clock tolerance) the token is dead.
    h.clock.advance(600_000 + (h.tokens.clockToleranceSeconds + 1) * 1000);
    expect(await access(h, current)).toBe('unauthenticated');
  });

  it('past the ceiling renewal stops quietly; the task is not terminated', async () => {
    await harness({
      ceilingMs: 3600_000,
      timings: {
        ...(await import('../support/harness.js')).FAST_TIMINGS,
        agentLostThresholdMs: 10 * 3600_000,
      },
    });
    const a = await startAttempt(h);
    const firstIssue = h.clock.now();
    let current = a.token;
    let stoppedAt: number | undefined;
    for (let i = 0; i < 5 * 60 && stoppedAt === undefined; i++) {
      h.clock.advance(15_000);
      const hb = await heartbeat(h, current, a.session);
      expect(hb?.shouldTerminate).toBe(false);
      if (hb?.renewedToken) current = hb.renewedToken;
      else stoppedAt = h.clock.now();
    }
    // Renewal stopped at the first beat past oiat + ceiling — not earlier, not later.
    expect(stoppedAt! - firstIssue).toBeGreaterThan(3600_000);
    expect(stoppedAt! - firstIssue).toBeLessThanOrEqual(3600_000 + 15_000);
    expect(await access(h, current)).toBe('delivered'); // still valid until its exp
    // Later beats before exp: still no renewal, still not terminated.
    h.clock.advance(60_000);
    expect(await heartbeat(h, current, a.session)).toMatchObject({
      shouldTerminate: false,
      renewedToken: '',
    });
    // Past exp: the token resolves nothing, the task is still running and still beats.
    h.clock.advance(600_000 + (h.tokens.clockToleranceSeconds + 1) * 1000);
    expect(await access(h, current)).toBe('unauthenticated');
    expect(await heartbeat(h, current, a.session)).toMatchObject({ shouldTerminate: false });
    const ti = await h.store.getTaskInstanceById(a.identity.task_instance_id);
    expect(ti?.state).toBe('running');
  });

  it('the TTL outlasts every missed-beat tolerance the ladder accepts, so a slow heartbeat never drops a live task', () => {
    // Default tolerance: the 90 s agent-lost threshold (6 beats of 15 s). The boot ladder
    // refuses any configuration where the TTL does not exceed the agent-lost threshold.
    expect(agentTokenTtlSeconds(15)).toBeGreaterThan(90);
    for (const hb of [1, 5, 15, 30, 60, 120, 600, 3600]) {
      expect(agentTokenTtlSeconds(hb)).toBeGreaterThanOrEqual(4 * hb);
      const tolerated = validateTimingLadder({
        heartbeatIntervalSeconds: hb,
        agentLostThresholdSeconds: 6 * hb,
        tokenTtlSeconds: agentTokenTtlSeconds(hb),
        maxAttemptCredentialLifetimeSeconds: 86_400,
      });
      if (tolerated.length === 0) expect(agentTokenTtlSeconds(hb)).toBeGreaterThan(6 * hb);
    }
  });
});

describe('observe mode and transient errors', () => {
  it('observe delivers to a dead attempt and audits would-deny; a live one is not audited', async () => {
    await harness({ liveness: 'observe' });
    const a = await startAttempt(h);
    expect(await access(h, a.token)).toBe('delivered');
    expect(
      await h.store.listAudit(
        'default',
        { action: 'secret.liveness_would_deny' },
        { limit: 10, offset: 0 },
      ),
    ).toHaveLength(0);
    await report(h, a.token, 'success');
    expect(await access(h, a.token)).toBe('delivered');
    const audit = await h.store.listAudit(
      'default',
      { action: 'secret.liveness_would_deny' },
      { limit: 10, offset: 0 },
    );
    expect(audit).toHaveLength(1);
    expect(JSON.stringify(audit[0]!.payload)).not.toMatch(/v1|one/);
  });

  it('a datastore blip during the liveness read delivers and does not audit', async () => {
    await harness();
    const a = await startAttempt(h);
    const real = h.store.getAttemptLiveness.bind(h.store);
    h.store.getAttemptLiveness = () => Promise.reject(new Error('connection reset'));
    expect(await access(h, a.token)).toBe('delivered');
    h.store.getAttemptLiveness = real;
    expect(await h.store.listAudit('default', {}, { limit: 100, offset: 0 })).toEqual([]);
  });

  it('enforce scoping: exactly the declared names; an undeclared one is never returned', async () => {
    await harness();
    const a = await startAttempt(h);
    const res = await h.agent(a.token).getVariables({});
    expect(res.variables).toEqual({ v1: 'one' });
  });
});
