import { readdir, readFile, stat } from 'node:fs/promises';
import { resolveSandboxPlan } from '../executor/sandbox-plan.js';
import { sql } from 'kysely';
import { KyselyStore } from '../store/kysely-store.js';
import { openStore } from '../store/open-store.js';
import type { Store } from '../store/store.js';
import { openKubernetesAccessProbe } from './kubernetes-probe.js';
import type { DoctorDeps, DoctorStore, FileInfo } from './types.js';

/**
 * The real machine for buildDoctorReport: stat, small reads, this process's uid and
 * environment, the store opener and the cluster's access reviews. Nothing here writes.
 */
export function nodeDoctorDeps(env: NodeJS.ProcessEnv = process.env): DoctorDeps {
  return {
    async stat(path: string): Promise<FileInfo | null> {
      try {
        const s = await stat(path);
        return {
          mode: s.mode & 0o7777,
          uid: s.uid,
          dev: s.dev,
          kind: s.isFile() ? 'file' : s.isDirectory() ? 'directory' : 'other',
        };
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ENOENT' || code === 'ENOTDIR') return null;
        throw err;
      }
    },
    async readText(path: string): Promise<string | null> {
      try {
        return await readFile(path, 'utf8');
      } catch {
        return null;
      }
    },
    uid: typeof process.getuid === 'function' ? process.getuid() : null,
    env,
    openStore: openDoctorStore,
    kubernetesAccess: openKubernetesAccessProbe,
    sandboxPlan: (sub) => resolveSandboxPlan(sub),
    async listDir(path: string): Promise<string[] | null> {
      try {
        return await readdir(path);
      } catch {
        return null;
      }
    },
  };
}

/**
 * The running control plane's own store, for the server-side report: the same questions, asked
 * of the connection the server really uses; closing it is left to the control plane.
 */
export function liveDoctorStore(
  store: Pick<Store, 'dialect' | 'migrationStatus' | 'summarizeUndeclaredUse'>,
): DoctorStore {
  const sqlite = store instanceof KyselyStore && store.dialect === 'sqlite' ? store : null;
  return {
    migrationStatus: () => store.migrationStatus(),
    ...(sqlite !== null ? { secureDelete: () => secureDeleteOf(sqlite) } : {}),
    undeclaredUse: (tenantId) => store.summarizeUndeclaredUse(tenantId),
    close: () => Promise.resolve(),
  };
}

async function secureDeleteOf(sqlite: KyselyStore): Promise<number> {
  const { rows } = await sql<{ secure_delete: number }>`PRAGMA secure_delete`.execute(
    sqlite.kysely,
  );
  return Number(rows[0]?.secure_delete ?? 0);
}

/**
 * Opens the datastore the way the control plane does (same pragmas), so what doctor reports is
 * what standalone gets. Callers make sure a SQLite file exists first: opening one creates it.
 */
export async function openDoctorStore(
  db: Parameters<DoctorDeps['openStore']>[0],
): Promise<DoctorStore> {
  const store = await openStore(db);
  const sqlite = store instanceof KyselyStore && store.dialect === 'sqlite' ? store : null;
  return {
    migrationStatus: () => store.migrationStatus(),
    ...(sqlite !== null ? { secureDelete: () => secureDeleteOf(sqlite) } : {}),
    undeclaredUse: (tenantId) => store.summarizeUndeclaredUse(tenantId),
    close: () => store.close(),
  };
}
