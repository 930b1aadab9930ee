import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe } from 'vitest';
import { openStore } from '../../src/store/index.js';
import { directoryOnStore } from '../../src/store/kysely-directory.js';
import { registerVaultSuite } from './vault.suite.js';

// Real files, not :memory:: the canary test reads the database and its WAL byte for byte.
const dir = mkdtempSync(join(tmpdir(), 'leoflow-vault-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

describe('vault service on sqlite', () => {
  registerVaultSuite({
    fresh: async () => {
      n += 1;
      const file = join(dir, `vault-${n}.db`);
      const store = await openStore({ kind: 'sqlite', file });
      await store.migrate();
      // Lite's directory: the same file, as in production
      const directory = await directoryOnStore(store);
      await directory.migrate();
      return {
        store,
        directory,
        dump: () => {
          const parts = [file, `${file}-wal`, `${file}-journal`]
            .filter((f) => existsSync(f))
            .map((f) => readFileSync(f));
          return Promise.resolve(Buffer.concat(parts));
        },
      };
    },
  });
});
