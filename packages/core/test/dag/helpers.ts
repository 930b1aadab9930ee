import { existsSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compileDagYaml, type CompileResult } from '@leoflow/core';

export const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), 'fixtures');
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');

/** readScript as the CLI/server implement it: files inside the DAG folder only. */
export function folderReader(dir: string): (rel: string) => string | undefined {
  const root = resolve(dir);
  return (rel) => {
    const p = resolve(root, rel);
    if (!p.startsWith(root + sep)) return undefined;
    return existsSync(p) && statSync(p).isFile() ? readFileSync(p, 'utf8') : undefined;
  };
}

export function compileFolder(dir: string): CompileResult {
  return compileDagYaml({
    text: readFileSync(join(dir, 'leoflow.yaml'), 'utf8'),
    fileName: 'leoflow.yaml',
    dirName: basename(dir),
    readScript: folderReader(dir),
  });
}

export function compileFixture(name: string): CompileResult {
  return compileFolder(join(FIXTURES, name));
}

/** Compiles inline YAML with an optional in-memory script folder. */
export function compileText(
  text: string,
  scripts: Record<string, string> = {},
  dirName = 'inline_dag',
): CompileResult {
  return compileDagYaml({
    text,
    fileName: 'leoflow.yaml',
    dirName,
    readScript: (rel) => scripts[rel],
  });
}

export function expectOk(r: CompileResult): Extract<CompileResult, { ok: true }> {
  if (!r.ok) {
    throw new Error(
      `expected success, got:\n${r.errors.map((e) => `${e.line}:${e.column} ${e.code} ${e.path}: ${e.message}`).join('\n')}`,
    );
  }
  return r;
}

export function expectErrors(r: CompileResult): Extract<CompileResult, { ok: false }> {
  if (r.ok) throw new Error(`expected errors, got a spec for ${r.spec.dag_id}`);
  return r;
}
