import { describe, expect, it } from 'vitest';
import { standaloneConfig } from '../src/commands/standalone.js';

const PG = 'postgresql://127.0.0.1:5432/test';

describe('--database-schema (a cell of its own in a shared database)', () => {
  it("puts the cell's store in the named schema, the directory in its own", async () => {
    const cfg = await standaloneConfig(
      { databaseUrl: PG, databaseSchema: 'cell_a', directorySchema: 'dir' },
      {},
    );
    expect(cfg.database).toEqual({ kind: 'postgres', url: PG, schema: 'cell_a' });
    expect(cfg.directory.schema).toBe('dir');
    const fromEnv = await standaloneConfig(
      {},
      { LEOFLOW_DATABASE_URL: PG, LEOFLOW_DATABASE_SCHEMA: 'cell_b' },
    );
    expect(fromEnv.database).toEqual({ kind: 'postgres', url: PG, schema: 'cell_b' });
  });

  it('refuses a store schema that is the directory schema, and a schema without PostgreSQL', async () => {
    await expect(
      standaloneConfig({ databaseUrl: PG, databaseSchema: 'leoflow_directory' }, {}),
    ).rejects.toThrow(/schema of its own/);
    await expect(
      standaloneConfig({ databaseUrl: PG, directorySchema: 'public' }, {}),
    ).rejects.toThrow(/schema of its own/);
    await expect(standaloneConfig({ databaseSchema: 'cell_a' }, {})).rejects.toThrow(
      /needs --database-url/,
    );
  });
});
