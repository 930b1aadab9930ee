/**
 * Issue 38: the per-try delivery record is written when what it says changes, not on every
 * secret fetch. A repeated fetch of the same set writes nothing more; a changed set, a refusal
 * and another attempt are each written.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createHarness, type Harness } from '../support/harness.js';
import { setupVaultAndDag, startAttempt } from './support.js';

let h: Harness | undefined;
afterEach(async () => {
  vi.restoreAllMocks();
  await h?.close();
  h = undefined;
});

describe('delivery record writes', () => {
  it('one write per attempt, kind and delivered set; the record still says what was delivered', async () => {
    h = await createHarness();
    await setupVaultAndDag(h);
    const a = await startAttempt(h);
    const writes = vi.spyOn(h.store, 'noteAttemptDelivery');
    const agent = h.agent(a.token, a.session);
    for (let i = 0; i < 3; i++) expect((await agent.getVariables({})).variables.v1).toBe('one');
    expect(writes).toHaveBeenCalledTimes(1);
    await agent.getConnections({});
    expect(writes).toHaveBeenCalledTimes(2); // another kind
    const [record] = await h.store.listAttemptRecords(a.identity.dag_run_id, 't');
    expect(record?.variables_delivered).toEqual(['v1']);
  });
});
