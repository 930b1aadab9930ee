import { readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO } from '../support/processes.js';

/** Every test file the docs cite as proof (docs/security.md's threat model, …) exists. */
describe('test files named in the docs', () => {
  it('exist, by path when the doc gives one, else by file name', () => {
    const testFiles = readdirSync(REPO, { recursive: true, encoding: 'utf8' }).filter(
      (f) => f.endsWith('.test.ts') && !f.includes('node_modules'),
    );
    const names = new Set(testFiles.map((f) => basename(f)));
    const paths = new Set(testFiles);
    const docs = [
      'README.md',
      ...readdirSync(join(REPO, 'docs'))
        .filter((f) => f.endsWith('.md'))
        .map((f) => `docs/${f}`),
    ];
    const missing: string[] = [];
    for (const doc of docs) {
      const text = readFileSync(join(REPO, doc), 'utf8');
      for (const m of text.matchAll(/`([\w./-]+\.test\.ts)`/g)) {
        const ref = m[1]!;
        const ok = ref.includes('/') ? paths.has(ref) : names.has(ref);
        if (!ok) missing.push(`${doc}: ${ref}`);
      }
    }
    expect(missing).toEqual([]);
  });
});
