import { basename, dirname } from 'node:path';
import { realpathSync } from 'node:fs';
import { locateDeclaration, type CompileResult, type YamlPosition } from '@leoflow/core';
import {
  compileDagFolder,
  findDagFolders,
  readDagFile,
  type CompileFolderOptions,
} from './compile-folder.js';

/**
 * How DAG sources are found and compiled: the one seam the watched DAGs folder and
 * `leoflow dags test` go through, so another source format (a Python DAG file, evaluated in the
 * sandbox) plugs in by giving these three functions, without touching either caller.
 */
export interface DagFileLoader {
  /** the DAG sources under a DAGs folder (each a folder holding a DAG file), sorted */
  find(dagsFolder: string): string[];
  /**
   * Compiles one DAG source; `file` is the DAG file it read. Throws an error with code ENOENT
   * when the source holds no DAG file (it was removed).
   */
  compile(dir: string, opts?: CompileFolderOptions): CompileResult & { file: string };
  /** where `file` declares a Variable or Connection name, for a refused declaration */
  locateDeclaration(
    file: string,
    kind: 'variables' | 'connections',
    name: string,
  ): YamlPosition | null;
}

/** leoflow.yaml folders: compileDagFolder and findDagFolders, as `dags push` uses them. */
export const defaultDagLoader: DagFileLoader = {
  find: findDagFolders,
  compile: (dir, opts) => compileDagFolder(dir, opts),
  locateDeclaration(file, kind, name) {
    try {
      const text = readDagFile(realpathSync(dirname(file)), basename(file));
      return text === undefined ? null : locateDeclaration(text, kind, name);
    } catch {
      return null;
    }
  },
};
