import { afterAll, beforeAll, expect, it } from 'vitest';
import { createApiHarness, PLATFORM_TENANT, type ApiHarness } from '../support/api-harness.js';
import { forEachDialect } from '../support/dialects.js';

// What `leoflow secrets rotate-key --prune` prints is this reply: with only a runner token
// sealed, "0 still under older keys" and a pruned key would lose that token for good.
forEachDialect('vault key rotation over REST re-seals runner tokens', (dialect) => {
  let h: ApiHarness;
  let platformAdmin: string;
  let operator: string;

  beforeAll(async () => {
    h = await createApiHarness(dialect);
    platformAdmin = await h.tokenFor(PLATFORM_TENANT, 'admin');
    operator = await h.tokenFor('team-rot', 'operator');
  });
  afterAll(() => h.close());

  it('rotate-key counts the runner token as remaining until re-sealed, and prune keeps it revealable', async () => {
    const created = await h.request(operator, 'POST', '/api/v1/runners', {
      name: 'lin-rot',
      kind: 'inbound',
    });
    expect(created.status, created.text).toBe(201);
    const token = created.json.token as string;
    const oldKey = (await h.directory.getRunner('team-rot', 'lin-rot'))?.token_key_id;
    expect(oldKey).toBeTypeOf('string');

    const rotated = await h.request(platformAdmin, 'POST', '/api/v1/secrets/rotate-key', {
      prune: true,
    });
    expect(rotated.status, rotated.text).toBe(200);
    expect(rotated.json).toMatchObject({
      new_key: true,
      resealed: 1,
      remaining_under_old_keys: 0,
      pruned: [oldKey],
    });
    const current = rotated.json.current_key_id as string;
    expect(current).not.toBe(oldKey);
    expect((await h.directory.getRunner('team-rot', 'lin-rot'))?.token_key_id).toBe(current);
    expect(rotated.text).not.toContain(token);

    // the old key is gone from the keyring (and this process); the token still opens
    const again = await h.request(operator, 'POST', '/api/v1/runners/lin-rot/reveal-token');
    expect(again.status, again.text).toBe(200);
    expect(again.json.token === token).toBe(true);
  });
});
