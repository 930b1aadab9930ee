import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../src/program.js';

const REPO = resolve(fileURLToPath(import.meta.url), '../../../..');

/** Every `leoflow <command> [<subcommand>]` the web app, server messages and docs tell a user to run. */
const PLACES = ['packages/ui/src', 'packages/server/src', 'packages/core/src', 'docs', 'README.md'];

function files(path: string): string[] {
  const full = join(REPO, path);
  if (statSync(full).isFile()) return [full];
  return readdirSync(full, { recursive: true, encoding: 'utf8' })
    .map((f) => join(full, f))
    .filter((f) => /\.(tsx?|md)$/.test(f) && !f.includes('/gen/'));
}

/** True when the words walk the command tree until a leaf (later words are its arguments). */
function resolves(program: Command, words: string[]): boolean {
  let cmd = program;
  for (const w of words) {
    if (cmd.commands.length === 0) return true;
    const next = cmd.commands.find((c) => c.name() === w || c.aliases().includes(w));
    if (!next) return false;
    cmd = next;
  }
  return true;
}

describe('commands named outside the CLI', () => {
  it('every `leoflow <command> <subcommand>` a page, message or doc names exists', () => {
    const program = buildProgram();
    const top = new Set(program.commands.map((c) => c.name()));
    const wrong: string[] = [];
    for (const place of PLACES) {
      for (const file of files(place)) {
        const text = readFileSync(file, 'utf8');
        for (const m of text.matchAll(/\bleoflow ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?/g)) {
          if (!top.has(m[1]!)) continue; // prose ("leoflow is…"), not a command
          const words = [m[1]!, ...(m[2] ? [m[2]] : [])];
          if (!resolves(program, words))
            wrong.push(`${relative(REPO, file)}: leoflow ${words.join(' ')}`);
        }
      }
    }
    expect([...new Set(wrong)]).toEqual([]);
  });
});

describe('standalone flags in docs/configuration.md', () => {
  it('every flag of the standalone table exists, and every standalone flag is in the docs', () => {
    const standalone = buildProgram().commands.find((c) => c.name() === 'standalone')!;
    const real = new Set(standalone.options.map((o) => o.long).filter((l) => l !== undefined));
    const doc = readFileSync(join(REPO, 'docs/configuration.md'), 'utf8');
    const documented = new Set(
      doc
        .split('\n')
        .filter((l) => l.startsWith('| `--'))
        .flatMap((l) => [...l.split('|')[1]!.matchAll(/`(--[a-z0-9-]+)`/g)].map((m) => m[1]!)),
    );
    expect([...documented].filter((f) => !real.has(f))).toEqual([]);
    expect([...real].filter((f) => !documented.has(f) && !doc.includes(`\`${f}`))).toEqual([]);
  });
});
