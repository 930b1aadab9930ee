import { dagSpecHash, formatDiagnostic, type Clock } from '@leoflow/core';
import type { Logger } from 'pino';
import type { ExecutorPolicy } from '../executor/executor-policy.js';
import { compileDagFolder, findDagFolders } from '../scheduler/dags/compile-folder.js';
import { checkDeclarations, checkExecutorChoices } from '../scheduler/dags/registration.js';
import type { Store } from '../store/store.js';

/** Registers every DAG folder under `folder` (at start); a broken one is logged and skipped. */
export async function loadDagsFolder(
  folder: string,
  store: Store,
  tenantId: string,
  clock: Clock,
  logger: Logger,
  opts: { policy?: ExecutorPolicy } = {},
): Promise<{ loaded: string[]; failed: string[] }> {
  const loaded: string[] = [];
  const failed: string[] = [];
  for (const dir of findDagFolders(folder)) {
    // A DAG folder symlinked to somewhere outside the dags folder is refused like a script is.
    const result = compileDagFolder(dir, { within: folder });
    if (!result.ok) {
      failed.push(dir);
      logger.error(
        { file: result.file, errors: result.errors.length },
        `DAG not loaded:\n${result.errors.map(formatDiagnostic).join('\n')}`,
      );
      continue;
    }
    try {
      if (opts.policy) checkExecutorChoices(opts.policy, tenantId, result.spec);
      await checkDeclarations(store, tenantId, result.spec);
    } catch (err) {
      failed.push(dir);
      logger.error({ file: result.file }, `DAG not loaded: ${(err as Error).message}`);
      continue;
    }
    const out = await store.putDagVersion(
      tenantId,
      result.spec,
      dagSpecHash(result.spec),
      clock.now(),
    );
    loaded.push(result.spec.dag_id);
    logger.info(
      { dag_id: result.spec.dag_id, version: out.version, created: out.created },
      'DAG loaded',
    );
  }
  return { loaded, failed };
}
