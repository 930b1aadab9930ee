import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join, resolve, sep } from 'node:path';
import { compileDagYaml, type CompileResult } from '@leoflow/core';

export const DAG_FILE = 'leoflow.yaml';

/** Compiles one DAG folder (`<dir>/leoflow.yaml`), reading `script:` files inside the folder only. */
export function compileDagFolder(dir: string): CompileResult & { file: string } {
  const root = resolve(dir);
  const file = join(root, DAG_FILE);
  const text = readFileSync(file, 'utf8');
  const result = compileDagYaml({
    text,
    fileName: file,
    dirName: basename(root),
    readScript: (rel) => {
      const p = resolve(root, rel);
      // A script path must stay inside the DAG folder.
      if (p !== root && !p.startsWith(root + sep)) return undefined;
      try {
        return readFileSync(p, 'utf8');
      } catch {
        return undefined;
      }
    },
  });
  return { ...result, file };
}

/** Every immediate sub-folder of a dags folder that holds a leoflow.yaml (or the folder itself). */
export function findDagFolders(dagsFolder: string): string[] {
  const root = resolve(dagsFolder);
  if (existsSync(join(root, DAG_FILE))) return [root];
  return readdirSync(root)
    .map((name) => join(root, name))
    .filter((p) => statSync(p).isDirectory() && existsSync(join(p, DAG_FILE)))
    .sort();
}
