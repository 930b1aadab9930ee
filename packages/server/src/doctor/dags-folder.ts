import type { SectionContext } from './findings.js';

/** Doctor section: the DAGs folder, when one is configured, is a directory. */
export async function dagsFolder(ctx: SectionContext): Promise<void> {
  const { cfg, stat, check } = ctx;
  if (cfg.dagsFolder !== null) {
    const d = await stat(cfg.dagsFolder);
    if (d.info?.kind === 'directory') check('dags_folder.exists', 'ok', `${cfg.dagsFolder} exists`);
    else
      check(
        'dags_folder.exists',
        'warn',
        `${cfg.dagsFolder} is not a directory: no DAG will load from it; fix --dags-folder / LEOFLOW_DAGS_FOLDER`,
      );
  }
}
