/**
 * A heartbeat signs a renewed token only when it hands one out: live, not asked to terminate,
 * not revoked. A superseded or terminating attempt's heartbeat costs no signature, and its
 * answer carries no token; a live one gets exactly one, recorded in the delivery record.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createHarness, type Harness } from '../support/harness.js';
import { heartbeat, setupVaultAndDag, startAttempt } from './support.js';

let h: Harness | undefined;
afterEach(async () => {
  vi.restoreAllMocks();
  await h?.close();
  h = undefined;
});

describe('heartbeat renewal signs only what it hands out', () => {
  it('a live attempt gets one renewed token per heartbeat, and the record counts it', async () => {
    h = await createHarness();
    await setupVaultAndDag(h);
    const a = await startAttempt(h);
    const mint = vi.spyOn(h.tokens, 'mint');
    h.clock.advance(15_000);
    const hb = await heartbeat(h, a.token);
    expect(hb?.renewedToken).not.toBe('');
    expect(mint).toHaveBeenCalledTimes(1);
    const [record] = await h.store.listAttemptRecords(a.identity.dag_run_id, 't');
    expect(record?.renewals).toBe(1);
    const exp = (await h.tokens.verify(hb!.renewedToken, h.clock.now())).exp;
    expect(record?.credential_exp).toBe(exp * 1000);
  });

  it('the renewed token is already in the verified-token cache: its first use costs no verification (issue 38)', async () => {
    h = await createHarness();
    await setupVaultAndDag(h);
    const a = await startAttempt(h);
    h.clock.advance(15_000);
    const hb = await heartbeat(h, a.token);
    const before = h.verifier.stats();
    const claims = await h.verifier.verify(hb!.renewedToken, h.clock.now());
    expect(h.verifier.stats().misses).toBe(before.misses);
    expect(h.verifier.stats().hits).toBe(before.hits + 1);
    expect(claims).toEqual(await h.tokens.verify(hb!.renewedToken, h.clock.now()));
  });

  it('a terminating attempt is told to stop, gets no token, and nothing is signed or counted', async () => {
    h = await createHarness();
    await setupVaultAndDag(h);
    const a = await startAttempt(h);
    await h.store.updateTaskInstance(
      a.identity.task_instance_id,
      { states: ['running'], try_number: 1 },
      { terminate_requested: true },
      h.clock.now(),
    );
    const mint = vi.spyOn(h.tokens, 'mint');
    h.clock.advance(15_000);
    const hb = await heartbeat(h, a.token);
    expect([hb?.shouldTerminate, hb?.renewedToken]).toEqual([true, '']);
    expect(mint).not.toHaveBeenCalled();
    const [record] = await h.store.listAttemptRecords(a.identity.dag_run_id, 't');
    expect(record?.renewals).toBe(0);
  });

  it('a superseded attempt is told to stop and nothing is signed', async () => {
    h = await createHarness();
    await setupVaultAndDag(h);
    const a = await startAttempt(h);
    await h.store.updateTaskInstance(
      a.identity.task_instance_id,
      { states: ['running'], try_number: 1 },
      { state: 'failed' },
      h.clock.now(),
    );
    const mint = vi.spyOn(h.tokens, 'mint');
    const hb = await heartbeat(h, a.token);
    expect([hb?.shouldTerminate, hb?.renewedToken]).toEqual([true, '']);
    expect(mint).not.toHaveBeenCalled();
  });
});
