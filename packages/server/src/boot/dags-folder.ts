import { formatDiagnostic, type Clock } from '@leoflow/core';
import type { Logger } from 'pino';
import type { ExecutorPolicy } from '../executor/executor-policy.js';
import { defaultDagLoader, type DagFileLoader } from '../scheduler/dags/dag-loader.js';
import { syncDagsFolder, type FolderSyncResult } from '../scheduler/dags/folder-sync.js';
import { DagsFolderWatcher } from '../scheduler/dags/folder-watcher.js';
import type { Store } from '../store/store.js';

export interface DagsFolderOptions {
  policy?: ExecutorPolicy;
  /** dags.paused_at_creation (default true, as the setting's) */
  pausedAtCreation?: boolean;
  loader?: DagFileLoader;
  /** the poll interval of the watch (fs.watch events come sooner) */
  pollMs?: number;
  useFsWatch?: boolean;
  /** after a sync that changed something (the web app's live stream listens) */
  onChange?: () => void;
}

/**
 * Logs what a sync found broken, one entry per diagnostic: file:line:column, code, message and
 * hint as fields (one line of JSON each), and the same as readable text in pretty mode.
 */
function logImportErrors(logger: Logger, result: FolderSyncResult, previous: Set<string>): void {
  for (const e of result.errors) {
    const key = JSON.stringify(e);
    if (previous.has(key)) continue;
    for (const d of e.diagnostics) {
      logger.error(
        {
          file: d.file,
          line: d.line,
          column: d.column,
          code: d.code,
          hint: d.hint,
          ...(e.dag_id ? { dag_id: e.dag_id } : {}),
        },
        `DAG not loaded: ${formatDiagnostic({ ...d, severity: 'error' }).split('\n')[0]}`,
      );
    }
  }
}

/** Registers every DAG folder under `folder` once; what does not load is an import error. */
export async function loadDagsFolder(
  folder: string,
  store: Store,
  tenantId: string,
  clock: Clock,
  logger: Logger,
  opts: DagsFolderOptions = {},
): Promise<{ loaded: string[]; failed: string[] }> {
  const result = await syncDagsFolder(folder, {
    store,
    tenantId,
    clock,
    logger,
    loader: opts.loader ?? defaultDagLoader,
    pausedAtCreation: opts.pausedAtCreation ?? true,
    ...(opts.policy ? { policy: opts.policy } : {}),
  });
  logImportErrors(logger, result, new Set());
  return { loaded: result.loaded.map((l) => l.dag_id), failed: result.errors.map((e) => e.file) };
}

/**
 * The watched DAGs folder (issue 40): loaded once before start returns, then kept in step —
 * new, changed, removed and broken files are picked up within about a second through fs.watch,
 * and within `pollMs` where fs.watch misses them.
 */
export async function watchDagsFolder(
  folder: string,
  store: Store,
  tenantId: string,
  clock: Clock,
  logger: Logger,
  opts: DagsFolderOptions = {},
): Promise<DagsFolderWatcher> {
  let reported = new Set<string>();
  const sync = async () => {
    const result = await syncDagsFolder(folder, {
      store,
      tenantId,
      clock,
      logger,
      loader: opts.loader ?? defaultDagLoader,
      pausedAtCreation: opts.pausedAtCreation ?? true,
      ...(opts.policy ? { policy: opts.policy } : {}),
    });
    logImportErrors(logger, result, reported);
    reported = new Set(result.errors.map((e) => JSON.stringify(e)));
    opts.onChange?.();
  };
  const watcher = new DagsFolderWatcher(folder, sync, {
    pollMs: opts.pollMs ?? 2000,
    ...(opts.useFsWatch !== undefined ? { useFsWatch: opts.useFsWatch } : {}),
    onError: (err) =>
      logger.error(
        { err: err instanceof Error ? err.message : String(err), folder },
        'the DAGs folder could not be read; the DAGs loaded before stay as they were',
      ),
  });
  await watcher.start();
  return watcher;
}
