import { describe, expect, it } from 'vitest';
import { retryingForeignSchemaDrops } from '../../src/store/concurrent-schema-drop.js';

// Kysely's migrator probes the whole catalog; another schema dropped meanwhile fails that probe
// with `schema "<other>" does not exist` (seen as flaky storage tests on PostgreSQL).
const dropped = (schema: string) =>
  Object.assign(new Error(`store migration (setup) failed on postgres: x`), {
    cause: new Error(`schema "${schema}" does not exist`),
  });

describe('migrating while another schema is dropped', () => {
  it('retries when the catalog probe names another schema', async () => {
    let calls = 0;
    const out = await retryingForeignSchemaDrops('mine', async () => {
      calls++;
      if (calls < 3) throw dropped('theirs');
      return 'migrated';
    });
    expect([out, calls]).toEqual(['migrated', 3]);
  });

  it('throws at once when our own schema is missing, or on any other error', async () => {
    let calls = 0;
    await expect(
      retryingForeignSchemaDrops('mine', async () => {
        calls++;
        throw dropped('mine');
      }),
    ).rejects.toThrow('failed on postgres');
    await expect(
      retryingForeignSchemaDrops('mine', async () => {
        calls++;
        throw new Error('relation "x" does not exist');
      }),
    ).rejects.toThrow('relation');
    expect(calls).toBe(2);
  });

  it('gives up after a bounded number of tries', async () => {
    let calls = 0;
    await expect(
      retryingForeignSchemaDrops('mine', async () => {
        calls++;
        throw dropped('theirs');
      }),
    ).rejects.toThrow();
    expect(calls).toBe(5);
  });
});
