import { relative, resolve, sep } from 'node:path';
import {
  dagSpecHash,
  isLeoflowError,
  type Clock,
  type CompileDiagnostic,
  type DagSpec,
} from '@leoflow/core';
import type { Logger } from 'pino';
import type { ExecutorPolicy } from '../../executor/executor-policy.js';
import type { DagStore } from '../../store/ports/dags.js';
import type { SecretGrantStore } from '../../store/ports/secret-grants.js';
import type { DagImportDiagnostic } from '../../store/types.js';
import type { DagFileLoader } from './dag-loader.js';
import { checkExecutorChoices, declarationProblems } from './registration.js';

export interface FolderSyncDeps {
  store: DagStore & Pick<SecretGrantStore, 'getSecretGrants'>;
  tenantId: string;
  clock: Clock;
  logger: Logger;
  loader: DagFileLoader;
  policy?: ExecutorPolicy;
  /** dags.paused_at_creation */
  pausedAtCreation: boolean;
}

/** A DAG file that did not load: where, which DAG (when known), and why. */
export interface FolderImportError {
  /** relative to the DAGs folder */
  file: string;
  dag_id: string | null;
  diagnostics: DagImportDiagnostic[];
}

export interface FolderSyncResult {
  loaded: { dag_id: string; file: string; version: number; created: boolean }[];
  errors: FolderImportError[];
  /** DAGs whose file is gone (or names another dag_id now): no scheduled run until it is back */
  deactivated: string[];
}

/**
 * One pass over the DAGs folder: every DAG source is compiled and checked as a push is (the
 * executor policy, then the declarations against the vault and its grants) and registered when
 * it passes — a new DAG paused when dags.paused_at_creation. What does not pass is an import
 * error with file:line:column, code and hint, stored for `leoflow dags errors`, the API and the
 * web app; a broken file keeps its DAG's last good version. A DAG whose file is gone becomes
 * inactive. Idempotent: an unchanged folder writes nothing but what is already there.
 */
export async function syncDagsFolder(
  folder: string,
  deps: FolderSyncDeps,
): Promise<FolderSyncResult> {
  const { store, tenantId, clock, logger, loader } = deps;
  const root = resolve(folder);
  const rel = (file: string) => relative(root, file).split(sep).join('/') || file;
  const result: FolderSyncResult = { loaded: [], errors: [], deactivated: [] };
  const presentFiles = new Set<string>();
  const loadedFiles = new Map<string, string>(); // file → dag_id
  const byDagId = new Map<string, string>(); // dag_id → file that registered it
  for (const dir of loader.find(root)) {
    let compiled;
    try {
      compiled = loader.compile(dir, { within: root });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue; // removed meanwhile
      throw err;
    }
    const file = rel(compiled.file);
    presentFiles.add(file);
    const diag = (d: Omit<CompileDiagnostic, 'severity'>): DagImportDiagnostic => ({
      code: d.code,
      message: d.message,
      file: rel(d.file),
      line: d.line,
      column: d.column,
      path: d.path,
      hint: d.hint,
    });
    if (!compiled.ok) {
      result.errors.push({ file, dag_id: null, diagnostics: compiled.errors.map(diag) });
      continue;
    }
    const spec = compiled.spec;
    const first = byDagId.get(spec.dag_id);
    if (first !== undefined) {
      result.errors.push({
        file,
        dag_id: spec.dag_id,
        diagnostics: [
          diag({
            code: 'LF_DAG_ID_DUPLICATE',
            message: `dag_id "${spec.dag_id}" is already loaded from ${first}; this file was not loaded`,
            file: compiled.file,
            line: 1,
            column: 1,
            path: 'dag_id',
            hint: `give one of the two DAGs another dag_id (${first} was loaded first, in path order)`,
          }),
        ],
      });
      continue;
    }
    const refused = await refusalsOf(deps, compiled.file, spec, diag);
    if (refused.length > 0) {
      result.errors.push({ file, dag_id: spec.dag_id, diagnostics: refused });
      continue;
    }
    const out = await store.putDagVersion(tenantId, spec, dagSpecHash(spec), clock.now(), {
      pausedAtCreation: deps.pausedAtCreation,
      sourceFile: file,
    });
    byDagId.set(spec.dag_id, file);
    loadedFiles.set(file, spec.dag_id);
    result.loaded.push({ dag_id: spec.dag_id, file, ...out });
    if (out.created) logger.info({ dag_id: spec.dag_id, file, version: out.version }, 'DAG loaded');
  }
  await store.setDagImportErrors(tenantId, result.errors, clock.now());
  for (const d of await store.listFolderDags(tenantId)) {
    if (!d.is_active) continue;
    const now = loadedFiles.get(d.source_file);
    const gone = !presentFiles.has(d.source_file);
    // A broken file keeps its DAG (last good version); a file that now names another dag_id,
    // or no file at all, leaves this one without a source.
    if (gone || (now !== undefined && now !== d.dag_id)) {
      if (await store.setDagActive(tenantId, d.dag_id, false, clock.now())) {
        result.deactivated.push(d.dag_id);
        logger.info(
          { dag_id: d.dag_id, file: d.source_file },
          'DAG file gone from the DAGs folder: the DAG is inactive (no scheduled run) until it is back',
        );
      }
    }
  }
  return result;
}

/** What keeps a compiled DAG out: executor choices this control plane refuses, and declarations of
 * secrets that do not exist or are not granted to it (each located in the DAG file). */
async function refusalsOf(
  deps: FolderSyncDeps,
  sourceFile: string,
  spec: DagSpec,
  diag: (d: Omit<CompileDiagnostic, 'severity'>) => DagImportDiagnostic,
): Promise<DagImportDiagnostic[]> {
  const { store, tenantId, loader } = deps;
  const refused: DagImportDiagnostic[] = [];
  if (deps.policy) {
    try {
      checkExecutorChoices(deps.policy, tenantId, spec);
    } catch (err) {
      if (!isLeoflowError(err)) throw err;
      refused.push(
        diag({
          code: err.code,
          message: err.message,
          file: sourceFile,
          line: 1,
          column: 1,
          path: 'tasks',
          hint: 'use an executor and Kubernetes choices this control plane allows (leoflow doctor lists them)',
        }),
      );
    }
  }
  for (const p of await declarationProblems(store, tenantId, spec)) {
    const at = loader.locateDeclaration(sourceFile, p.kind, p.name);
    const noun = p.kind === 'variables' ? 'variable' : 'connection';
    refused.push(
      diag({
        code: p.code,
        message:
          p.code === 'LF_DAG_UNKNOWN_DECLARATION'
            ? `dag "${spec.dag_id}" declares ${noun} "${p.name}", which does not exist`
            : `dag "${spec.dag_id}" declares ${noun} "${p.name}", which is not granted to it`,
        file: sourceFile,
        line: at?.line ?? 1,
        column: at?.column ?? 1,
        path: at?.path ?? p.kind,
        hint: p.hint,
      }),
    );
  }
  return refused;
}
