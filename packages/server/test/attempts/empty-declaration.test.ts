import { parseConnectionUri } from '@leoflow/core';
import { createHash } from 'node:crypto';
import { afterEach, expect, it } from 'vitest';
import { forEachDialect } from '../support/dialects.js';
import { createHarness, spec, task, type Harness } from '../support/harness.js';

/**
 * Issue 34, finding 5: under secret_scoping=enforce an empty declaration delivers nothing — and
 * reads nothing: the server's branch for it (attempts/secret-delivery.ts) must never fall back
 * to the whole vault. Two-sided: a task of the same DAG run that declares something gets exactly
 * that. The vault is watched, so "nothing" means no value was even read.
 */
let h: Harness;
afterEach(async () => {
  await h?.close();
});

const CANARY = 'canary-empty-declaration-0c1e';

forEachDialect('an empty declaration under enforce', (dialect) => {
  it('GetVariables and GetConnections (and Register’s prefetch) answer empty without reading the vault; a declaring task gets exactly its names', async () => {
    h = await createHarness({ dialect, scoping: 'enforce', liveness: 'enforce' });
    const now = h.clock.now();
    await h.vault.setVariable('default', 'v1', CANARY, { secret: true }, now);
    await h.vault.setConnection(
      'default',
      'c1',
      parseConnectionUri(`postgres://u:${CANARY}@db/x`),
      '',
      now,
    );
    const s = spec({
      dag_id: 'empty',
      tasks: [task('none'), task('some', { variables: ['v1'] })],
    });
    await h.store.putDagVersion(
      'default',
      s,
      createHash('sha256').update(JSON.stringify(s)).digest('hex'),
      now,
    );
    const reads: string[] = [];
    for (const m of ['resolveVariables', 'resolveConnections'] as const) {
      const real = h.vault[m].bind(h.vault) as (...a: unknown[]) => Promise<unknown>;
      (h.vault as unknown as Record<string, unknown>)[m] = (...a: unknown[]) => {
        reads.push(`${m}(${JSON.stringify(a[1])})`);
        return real(...a);
      };
    }
    await h.runs.trigger('default', 'empty', {});
    await h.scheduler.tick();
    const launches = h.executor.take();
    const of = (t: string) => launches.find((l) => l.identity.task_id === t)!;
    const none = h.agent(of('none').token, 'k-none');
    const reg = await none.register({
      agentVersion: 't',
      hostname: 'h',
      pid: 1,
      sessionKey: 'k-none',
      prefetch: true,
    });
    expect(reg.prefetch?.variables?.variables).toEqual({});
    expect(reg.prefetch?.connections?.connectionUris).toEqual({});
    expect((await none.getVariables({})).variables).toEqual({});
    expect((await none.getConnections({})).connectionUris).toEqual({});
    expect(reads).toEqual([]);
    const rec = await h.store.getAttemptRecord(of('none').identity.task_instance_id, 1);
    expect(rec).toMatchObject({ variables_delivered: [], connections_delivered: [] });

    // availability: the task that declares v1 gets v1, read by name
    const some = h.agent(of('some').token, 'k-some');
    await some.register({ agentVersion: 't', hostname: 'h', pid: 2, sessionKey: 'k-some' });
    expect((await some.getVariables({})).variables).toEqual({ v1: CANARY });
    expect(reads).toEqual(['resolveVariables(["v1"])']);
  });
});
