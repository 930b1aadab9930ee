import type { Clock } from '@leoflow/core';
import type { ServerConfig } from '../config/server-config.js';
import { openStore } from '../store/index.js';
import { directoryOnStore, openDirectory, type Directory } from '../store/kysely-directory.js';
import type { Store } from '../store/store.js';
import { prepareDataDir } from './data-dir.js';
import type { Lifecycle } from './lifecycle.js';

export interface OpenData {
  store: Store;
  /** the directory the door reads: Lite's is the same SQLite file, Pro's a schema of its own */
  directory: Directory;
}

/** Phase 1: the data directory, the store (migrated) and the directory. */
export async function openData(
  cfg: ServerConfig,
  clock: Clock,
  life: Lifecycle,
): Promise<OpenData> {
  prepareDataDir(cfg.dataDir);
  const store = await openStore(cfg.database);
  life.add({ name: 'store', stop: () => store.close() });
  await store.migrate();
  await store.ensureTenant(cfg.tenantId, cfg.tenantId, clock.now());
  const directory =
    cfg.database.kind === 'sqlite'
      ? await directoryOnStore(store)
      : await openDirectory({
          kind: 'postgres',
          url: cfg.database.url,
          schema: cfg.directory.schema,
        });
  life.add({ name: 'directory', stop: () => directory.close() });
  await directory.migrate();
  return { store, directory };
}
