import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  ERROR_CATALOGUE,
  isRegisteredErrorCode,
  renderErrorCatalogueMarkdown,
} from '@leoflow/core';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CATALOGUE = 'packages/core/src/errors/catalogue.ts';

/**
 * Every .ts/.tsx file under packages/<name>/src (generated protobuf code has no LF_ codes), and
 * the Python task SDK's .py files (python/leoflow/src), which raise the same codes.
 */
function sourceFiles(): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const p = join(dir, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (/\.tsx?$|\.py$/.test(name)) out.push(p);
    }
  };
  walk(join(ROOT, 'python/leoflow/src'));
  for (const pkg of readdirSync(join(ROOT, 'packages'))) {
    const src = join(ROOT, 'packages', pkg, 'src');
    try {
      if (statSync(src).isDirectory()) walk(src);
    } catch {
      // a package without src/
    }
  }
  return out;
}

/** The `LF_…` string literals of each source file: codes thrown, sent or compared. */
export function codeLiterals(text: string): string[] {
  return [...text.matchAll(/(['"`])(LF_[A-Z0-9_]+)\1/g)].map((m) => m[2] ?? '');
}

/** Codes built at run time (`LF_${x}`, 'LF_' + x) escape the scan, so they are refused. */
export function builtCodes(text: string): string[] {
  return [...text.matchAll(/`LF_[A-Z0-9_]*\$\{|['"]LF_[A-Z0-9_]*['"]\s*\+/g)].map((m) => m[0]);
}

const files = sourceFiles().map((p) => ({
  path: relative(ROOT, p),
  text: readFileSync(p, 'utf8'),
}));

describe('the error catalogue (packages/core/src/errors/catalogue.ts)', () => {
  it('registers every LF_ code the sources throw, send or compare', () => {
    const missing: string[] = [];
    for (const f of files) {
      if (f.path === CATALOGUE) continue;
      for (const code of codeLiterals(f.text))
        if (!isRegisteredErrorCode(code)) missing.push(`${code} (${f.path})`);
    }
    expect(missing, 'add these codes to the catalogue, or use a registered one').toEqual([]);
  });

  it('refuses codes assembled at run time, which the scan above cannot see', () => {
    const built = files.flatMap((f) => builtCodes(f.text).map((b) => `${f.path}: ${b}`));
    expect(built, 'write each code as a whole string literal').toEqual([]);
  });

  it('holds no code that nothing in the sources uses', () => {
    const used = new Set(
      files.filter((f) => f.path !== CATALOGUE).flatMap((f) => codeLiterals(f.text)),
    );
    const dead = Object.keys(ERROR_CATALOGUE).filter((c) => !used.has(c));
    expect(dead, 'remove these from the catalogue').toEqual([]);
  });

  it('the scan catches a planted unregistered code in a throw', () => {
    const planted = "throw new LeoflowError('LF_PLANTED_UNREGISTERED', 'x');";
    const codes = codeLiterals(planted);
    expect(codes).toEqual(['LF_PLANTED_UNREGISTERED']);
    expect(codes.filter((c) => !isRegisteredErrorCode(c))).toEqual(['LF_PLANTED_UNREGISTERED']);
    expect(builtCodes('new LeoflowError(`LF_${kind}_NOT_FOUND`, m)')).toHaveLength(1);
  });

  it('no source decides an error by the text of its message', () => {
    // Third-party errors are told apart by their code fields (Node errno, Connect's Code,
    // Fastify's statusCode), ours by code or class. The one exception is V8's stack overflow,
    // a RangeError with no code at all (packages/core/src/dag/compile.ts).
    const allowed = new Set(['packages/core/src/dag/compile.ts']);
    const found: string[] = [];
    const pattern =
      /\.test\([^)]*\bmessage\)|\bmessage\??\.(includes|match|startsWith|endsWith|search|indexOf)\(/g;
    for (const f of files) {
      if (allowed.has(f.path)) continue;
      for (const m of f.text.matchAll(pattern)) found.push(`${f.path}: ${m[0]}`);
    }
    expect(found).toEqual([]);
  });

  it('docs/errors.md is the catalogue rendered (regenerate with `npm run docs:errors`)', () => {
    const doc = readFileSync(join(ROOT, 'docs/errors.md'), 'utf8');
    expect(doc).toBe(renderErrorCatalogueMarkdown());
  });

  it('docs/api.md links the error table', () => {
    expect(readFileSync(join(ROOT, 'docs/api.md'), 'utf8')).toContain('(errors.md)');
  });
});
