import { afterEach, expect, it } from 'vitest';
import { createHarness, type Harness } from '../support/harness.js';
import { forEachDialect } from '../support/dialects.js';
import { access, heartbeat, report, setupVaultAndDag, startAttempt } from './support.js';

/**
 * The full loop against a real datastore and a real HTTP/2 round trip (the agent RPC server on
 * loopback): dispatch → mint → heartbeat-renew → finish → the token dies; plus retry and
 * clear-old-rerun end to end. Once on SQLite, once on PostgreSQL.
 */
forEachDialect('credential loop over real RPC', (dialect) => {
  let h: Harness;
  afterEach(async () => {
    await h?.close();
  });

  it('dispatch → mint → heartbeat renews → finish → the token dies', async () => {
    h = await createHarness({ scoping: 'enforce', liveness: 'enforce', rpc: 'http2', dialect });
    await setupVaultAndDag(h, { retries: 0 });
    const a = await startAttempt(h);
    expect(await access(h, a.token)).toBe('delivered');
    h.clock.advance(15_000);
    const hb = await heartbeat(h, a.token);
    expect(hb?.shouldTerminate).toBe(false);
    expect(hb?.renewedToken).not.toBe('');
    expect(await access(h, hb!.renewedToken)).toBe('delivered');
    await report(h, hb!.renewedToken, 'success');
    expect(await access(h, hb!.renewedToken)).toBe('denied');
    expect(await access(h, a.token)).toBe('denied');
  });

  it('retry: the superseded attempt dies, the retry resolves', async () => {
    h = await createHarness({ scoping: 'enforce', liveness: 'enforce', rpc: 'http2', dialect });
    await setupVaultAndDag(h, { retries: 1 });
    const first = await startAttempt(h);
    await report(h, first.token, 'failed');
    const second = await startAttempt(h, 'cred', 'existing');
    expect(await access(h, first.token)).toBe('denied');
    expect(await access(h, second.token)).toBe('delivered');
  });

  it('clear an old finished run: the rerun gets a fresh credential that resolves', async () => {
    h = await createHarness({ scoping: 'enforce', liveness: 'enforce', rpc: 'http2', dialect });
    await setupVaultAndDag(h, { retries: 0 });
    const a = await startAttempt(h);
    await report(h, a.token, 'success');
    await h.scheduler.tick();
    h.clock.advance(400 * 24 * 3600_000);
    const run = (await h.store.listRuns('default', {}, { limit: 1, offset: 0 }))[0]!;
    await h.runs.clear('default', 'cred', run.run_id, { taskIds: null, downstream: true });
    const b = await startAttempt(h, 'cred', run.run_id);
    expect(await access(h, b.token)).toBe('delivered');
    expect((await heartbeat(h, b.token))?.renewedToken).not.toBe('');
    await report(h, b.token, 'success');
    expect(await access(h, b.token)).toBe('denied');
  });
});
